/**
 * The llama.cpp children's protocol, shared: one JSON request on stdin, one JSON line on stdout;
 * a failure is a line { ok: false, error } (and the stack on stderr), exit code 1.
 */

/** Runs `main(request)` on the request read from stdin and writes its reply. */
export function runChild(main) {
  readStdin()
    .then((text) => main(JSON.parse(text)))
    .then((reply) => process.stdout.write(JSON.stringify(reply) + '\n'))
    .catch((error) => {
      process.stderr.write(`${error?.stack ?? error}\n`);
      process.stdout.write(JSON.stringify({ ok: false, error: String(error?.message ?? error) }) + '\n');
      process.exitCode = 1;
    });
}

function readStdin() {
  return new Promise((resolve, reject) => {
    let text = '';
    process.stdin.setEncoding('utf8');
    process.stdin.on('data', (chunk) => (text += chunk));
    process.stdin.on('end', () => resolve(text));
    process.stdin.on('error', reject);
  });
}

/**
 * Parent side of the llama.cpp runner: one child process per request, so that an abort inside
 * llama.cpp (bad metadata) or a hang becomes a PeerRunError here instead of killing the bench.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { PeerRunError } from '../lib/errors.mjs';

const childPath = fileURLToPath(new URL('./child.mjs', import.meta.url));
const stderrTailChars = 2000;

/**
 * request: { modelPath, threads, maxTokens, logitsMode, runs: [{ promptTokens, promptText? }] }
 * -> the child's reply { llamaCppRelease, loadMs, results: [...] } (see child.mjs).
 */
export function runLlamaCpp(request, { timeoutMs = 300_000, wrap = (argv) => [argv[0], argv.slice(1)] } = {}) {
  const { modelPath } = request;
  return new Promise((resolve, reject) => {
    // wrap: [command, args] for the child's argv (e.g. joining a memory cgroup first, bench/lib/cgroup.mjs).
    const [command, args] = wrap([process.execPath, childPath]);
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.stdout.setEncoding('utf8').on('data', (chunk) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk) => (stderr = (stderr + chunk).slice(-stderrTailChars)));
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(new PeerRunError(modelPath, `could not start the child: ${error.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const fail = (what) => reject(new PeerRunError(modelPath, what, { exitCode: code, signal, stderrTail: stderr }));
      if (timedOut) return fail(`no reply within ${timeoutMs} ms; the child was killed`);
      const reply = parseReply(stdout);
      if (reply?.ok === true) return resolve(reply);
      if (reply?.ok === false) return fail(`the child reported: ${reply.error}`);
      fail(`the child exited (code ${code}, signal ${signal}) without a reply; stderr tail:\n${stderr}`);
    });
    child.stdin.end(JSON.stringify(request));
  });
}

function parseReply(stdout) {
  const line = stdout.trim().split('\n').at(-1);
  if (!line) return undefined;
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}

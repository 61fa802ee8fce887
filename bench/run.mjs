/**
 * npm run bench -- <name> [options]: one entry point for the benchmarks (not tests: they
 * measure, compare against a baseline in the same run, and write results/<name>.json).
 */
const benches = {
  decode: () => import('./decode.mjs'),
  tier: () => import('./tier.mjs'),
};

const [name, ...rest] = process.argv.slice(2);
if (!name || !(name in benches)) {
  process.stderr.write(`usage: npm run bench -- <${Object.keys(benches).join('|')}> [options]${name ? ` (unknown bench ${JSON.stringify(name)})` : ''}\n`);
  process.exitCode = 2;
} else {
  benches[name]()
    .then((bench) => bench.main(rest))
    .catch((error) => {
      // Operating errors (with a code) say what to do; anything else is a bug: show its stack.
      process.stderr.write(`bench ${name} failed: ${error.code ? error.message : (error.stack ?? error)}\n`);
      process.exitCode = 1;
    });
}

/**
 * npm run bench -- <name> [options]: one entry point for the benchmarks (not tests: they
 * measure, compare against a baseline in the same run, and write results/local/<name>.json, or
 * with --update-results the committed results/<name>.json and README table).
 */
import { runBenchMain } from './lib/options.mjs';

const benches = {
  decode: () => import('./decode.mjs'),
  tier: () => import('./tier.mjs'),
  disk: () => import('./disk.mjs'),
  prefetch: () => import('./prefetch.mjs'),
  prefill: () => import('./prefill.mjs'),
  guard: () => import('./guard.mjs'),
  serve: () => import('./serve.mjs'),
};

const usage = `usage: npm run bench -- <${Object.keys(benches).join('|')}> [options]   (npm run bench -- <name> --help: its options)

Results of a run go to bench/results/local/ (git-ignored); --update-results writes the committed
bench/results/<name>.json and the bench/README.md table.
Other benches run directly: node bench/<builds|parity|replan|kernels|threads|forward-smoke|overlap|disk-probe|disk-uploads|predict|routing|agreement>.mjs --help`;

const [name, ...rest] = process.argv.slice(2);
if (name === '--help' || name === '-h') {
  process.stdout.write(`${usage}\n`);
} else if (!name || !(name in benches)) {
  process.stderr.write(`${usage}\n${name ? `unknown bench ${JSON.stringify(name)}\n` : ''}`);
  process.exitCode = 2;
} else {
  benches[name]().then(
    (bench) => runBenchMain(name, bench.main, rest),
    (error) => {
      process.stderr.write(`bench ${name} failed to load: ${error.stack ?? error}\n`);
      process.exitCode = 1;
    },
  );
}

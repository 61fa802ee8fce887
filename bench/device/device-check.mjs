/**
 * npm run device-check [-- --no-build] [--update-results]
 *
 * The CUDA backend's one prepared device check (issue 17): everything a GPU must show that
 * this project cannot show without one, in one short run with a timeout on every step, so a
 * second try fits in the few minutes a device machine is lent.
 *
 *   build    npm run build:native (the CUDA library is built when nvcc >= 12 is found)
 *   library  native/build/Release/libmoetier_cuda.so exists          else verdict "not-built"
 *   kernels  moetier_cuda_check: every kernel against the CPU's      exit 2: verdict "no-device"
 *   suite    the CUDA test suite (tests/device/, MOETIER_DEVICE=cuda): uploads, overwrite,
 *            events and their clock mapping, on the real runtime
 *   bench    bench/device/bench-device.mjs: upload bandwidth against the bus's nominal rate
 *
 * One JSON summary on stdout ({ verdict, steps, ... }); results/local/device.json, or with
 * --update-results results/device.json. Exit 0 pass, 1 fail, 2 no device or not built.
 * Steps that would need a part not built yet say so in their detail instead of passing.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseBenchArgs } from '../lib/options.mjs';
import { resultsTarget, writeResults } from '../lib/output.mjs';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const releaseDir = `${repo}native/build/Release`;
export const CUDA_LIBRARY = `${releaseDir}/libmoetier_cuda.so`;
export const KERNEL_CHECK = `${releaseDir}/moetier_cuda_check`;
const VITEST = `${repo}node_modules/vitest/vitest.mjs`;

/** Seconds each step may take; together well inside five minutes of device time. */
export const STEP_TIMEOUT_S = { build: 240, kernels: 60, suite: 150, bench: 120 };

const usage = `usage: npm run device-check [-- options]

The CUDA backend's device check: builds with CUDA, checks every kernel against the CPU, runs the
CUDA test suite and a short upload benchmark, and prints one JSON summary. Without a GPU (or
without nvcc at build time) it stops early with verdict "no-device" (or "not-built"), exit 2.`;

const options = {
  'no-build': { type: 'boolean', default: false, help: 'use the native build as it is' },
};

export async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return 0;
  const summary = { check: 'device', date: new Date().toISOString(), verdict: 'pass', steps: [] };
  const step = (name, run) => {
    const began = Date.now();
    const result = run();
    const { stdout, json, device, ...shown } = result; // the step list keeps verdicts; figures go to their own fields
    summary.steps.push({ name, seconds: (Date.now() - began) / 1000, ...shown });
    return result;
  };
  const stop = (verdict) => finish(summary, verdict, values['update-results']);

  if (!values['no-build']) {
    const built = step('build', () => command('npm', ['run', 'build:native'], STEP_TIMEOUT_S.build));
    if (built.status !== 'pass') return stop('fail');
  }
  const library = step('library', () =>
    existsSync(CUDA_LIBRARY)
      ? { status: 'pass', detail: CUDA_LIBRARY }
      : {
          status: 'not-built',
          detail: `${CUDA_LIBRARY} is missing: nvcc (CUDA >= 12) was not found when native/ was built`,
        },
  );
  if (library.status !== 'pass') return stop('not-built');

  const kernels = step('kernels', () => kernelCheck());
  summary.device = kernels.device;
  if (kernels.status === 'no-device') return stop('no-device');
  summary.kernels = kernels.json;
  if (kernels.status !== 'pass') summary.verdict = 'fail';

  const suite = step('suite', () =>
    // vitest's own entry under this Node.js: a device machine unpacked from the bundle has no npx.
    command(process.execPath, [VITEST, 'run', '--project', 'device'], STEP_TIMEOUT_S.suite, { MOETIER_DEVICE: 'cuda' }),
  );
  if (suite.status !== 'pass') summary.verdict = 'fail';

  const bench = step('bench', () =>
    jsonCommand('node', [`${repo}bench/device/bench-device.mjs`], STEP_TIMEOUT_S.bench),
  );
  summary.bench = bench.json;
  if (bench.status !== 'pass') summary.verdict = 'fail';
  return stop(summary.verdict);
}

function finish(summary, verdict, updateResults) {
  summary.verdict = verdict;
  writeResults(resultsTarget(updateResults), 'device', JSON.stringify(summary, null, 2) + '\n');
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  return verdict === 'pass' ? 0 : verdict === 'fail' ? 1 : 2;
}

/** moetier_cuda_check prints one JSON line; exit 0 pass, 1 fail, 2 no device. */
function kernelCheck() {
  const ran = jsonCommand(KERNEL_CHECK, [], STEP_TIMEOUT_S.kernels);
  if (ran.status === 'timeout') return ran;
  const verdict = ran.json?.verdict;
  if (ran.exitCode === 2 && verdict === 'no-device') {
    const why = ran.json.message ? `${ran.json.message} (cudaError ${ran.json.error})` : 'no CUDA device';
    return { status: 'no-device', detail: `no usable CUDA device: ${why}`, device: null };
  }
  if (ran.exitCode === 0 && verdict === 'pass') return { status: 'pass', device: ran.json.device, json: ran.json };
  return { status: 'fail', detail: ran.detail, json: ran.json };
}

function command(file, args, timeoutS, env = {}) {
  const r = spawnSync(file, args, {
    cwd: repo,
    encoding: 'utf8',
    timeout: timeoutS * 1000,
    env: { ...process.env, ...env },
    maxBuffer: 64 << 20,
  });
  if (r.error?.code === 'ETIMEDOUT')
    return {
      status: 'timeout',
      detail: `${file} ${args.join(' ')}: past ${timeoutS} s`,
      exitCode: null,
      stdout: r.stdout,
    };
  if (r.error) return { status: 'fail', detail: `${file}: ${r.error.message}`, exitCode: null };
  const tail = `${r.stdout ?? ''}${r.stderr ?? ''}`.slice(-2000);
  return {
    status: r.status === 0 ? 'pass' : 'fail',
    exitCode: r.status,
    ...(r.status === 0 ? {} : { detail: tail }),
    stdout: r.stdout,
  };
}

/** A command whose last stdout line is one JSON object. */
function jsonCommand(file, args, timeoutS) {
  const { stdout, ...r } = command(file, args, timeoutS);
  const last = (stdout ?? '').trim().split('\n').pop();
  let json;
  try {
    json = last ? JSON.parse(last) : undefined;
  } catch {
    return { ...r, status: 'fail', detail: `${file}: the last line is not JSON: ${last.slice(0, 200)}` };
  }
  return { ...r, json };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error) => {
      process.stderr.write(`device-check failed: ${error.code ? error.message : (error.stack ?? error)}\n`);
      process.exitCode = error.code === 'E_INVALID_OPTION' ? 2 : 1;
    },
  );
}

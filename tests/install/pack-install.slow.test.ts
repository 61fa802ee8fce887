/**
 * SLOW (~1-2 min: the install builds the native addon). The package as a user gets it:
 * `npm pack` -> a fresh app folder -> `npm ci --offline` of the tarball (the local npm cache only;
 * the proxies point at a closed port, so anything that tried to download would fail) -> the addon
 * built by the package's install script -> `import { openEngine } from 'moetier'` generates the
 * same tokens as this checkout, with types; the OpenTelemetry SDK is not installed, and
 * `moetier/otel` says so only when telemetry is asked for.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEngine } from '../../src/engine/engine.js';
import { collect, tempDir, tinyModel } from '../engine/tier-helpers.js';
import { appLockfile } from './app-lock.js';

const repo = path.resolve(import.meta.dirname, '../..');
const { dir, cleanup } = tempDir('moetier-pack-install-');
const app = path.join(dir, 'app');
let packedFiles: string[] = [];
let installLog = '';

/** The caller's environment without npm's run-script variables (npm test sets npm_config_*), downloads pointed at a closed port. */
function childEnv(): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k) && !k.startsWith('OTEL_')),
  );
  const closed = 'http://127.0.0.1:9';
  return {
    ...env,
    HTTP_PROXY: closed,
    HTTPS_PROXY: closed,
    http_proxy: closed,
    https_proxy: closed,
    NO_PROXY: '',
    no_proxy: '',
  };
}

function run(cmd: string, args: string[], cwd: string): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, { cwd, env: childEnv(), encoding: 'utf8', timeout: 240_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(async () => {
  const packed = JSON.parse(
    execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], {
      cwd: repo,
      env: childEnv(),
      encoding: 'utf8',
    }),
  )[0];
  packedFiles = packed.files.map((f: { path: string }) => f.path);
  const pkg = JSON.parse(readFileSync(path.join(repo, 'package.json'), 'utf8'));
  const { name, version, license, dependencies, peerDependencies, peerDependenciesMeta, bin, engines } = pkg;
  const spec = `file:../${packed.filename}`;
  mkdirSync(app);
  writeFileSync(
    path.join(app, 'package.json'),
    JSON.stringify({ name: 'app', private: true, type: 'module', dependencies: { moetier: spec } }),
  );
  const lock = appLockfile(
    path.join(repo, 'package-lock.json'),
    { spec, integrity: packed.integrity },
    { name, version, license, dependencies, peerDependencies, peerDependenciesMeta, bin, engines },
  );
  writeFileSync(path.join(app, 'package-lock.json'), JSON.stringify(lock));
  const install = run('npm', ['ci', '--offline', '--no-audit', '--no-fund', '--foreground-scripts'], app);
  installLog = install.stdout + install.stderr;
  if (install.code !== 0) throw new Error(`npm ci in the app failed (${install.code}):\n${installLog.slice(-4000)}`);
}, 300_000);
afterAll(() => cleanup());

describe('npm pack -> install into a fresh app -> generate', () => {
  it('packs the built code, the native sources and the install script; no tests, bench, caches, builds or source maps', () => {
    expect(packedFiles).toContain('dist/src/index.js');
    expect(packedFiles).toContain('dist/src/index.d.ts');
    expect(packedFiles).toContain('dist/otel/index.js');
    expect(packedFiles).toContain('native/CMakeLists.txt');
    expect(packedFiles).toContain('native/package.json'); // napi_versions: cmake-js builds against node-api-headers
    expect(packedFiles).toContain('scripts/install.mjs');
    expect(
      packedFiles.filter((f) =>
        /^(tests|bench|\.cache|\.ci|docs)\/|^native\/build(-debug)?\/|\.(js|ts)\.map$|\.gguf$|\.heat\.json$/.test(f),
      ),
    ).toEqual([]);
    expect(
      packedFiles.every((f) => /^(dist\/(src|otel)|native|scripts)\/|^(package\.json|README\.md|LICENSE)$/.test(f)),
    ).toBe(true);
  });

  it('built the addon on install from its dependencies, downloading nothing, and left the OpenTelemetry SDK out', () => {
    expect(installLog).toMatch(/moetier: building the native addon/);
    expect(existsSync(path.join(app, 'node_modules/moetier/native/build/Release/moetier.node'))).toBe(true);
    expect(existsSync(path.join(app, 'node_modules/node-api-headers/package.json'))).toBe(true);
    expect(existsSync(path.join(app, 'node_modules/@opentelemetry/api/package.json'))).toBe(true);
    for (const sdk of ['sdk-node', 'sdk-trace-base', 'exporter-trace-otlp-http', 'core', 'resources']) {
      expect(existsSync(path.join(app, 'node_modules/@opentelemetry', sdk))).toBe(false);
    }
  });

  it('imports openEngine from moetier and generates the tokens this checkout generates (tiny preset)', async () => {
    const model = await tinyModel(dir, 'q8_0', 3);
    writeFileSync(
      path.join(app, 'generate.mjs'),
      `import { openEngine } from 'moetier';
const engine = await openEngine({ model: process.argv[2], threads: 1, contextTokens: 64 });
const ids = [];
for await (const t of engine.generate('red green blue', { maxTokens: 6, stopAtEos: false })) ids.push(t.id);
await engine.close();
console.log(JSON.stringify(ids));`,
    );
    const r = run(process.execPath, ['generate.mjs', model], app);
    expect(r.stderr).toBe('');
    const ids = JSON.parse(r.stdout) as number[];
    expect(ids).toHaveLength(6);
    const here = await openEngine({ model, threads: 1, contextTokens: 64 });
    try {
      expect(ids).toEqual(await collect(here, 'red green blue', { maxTokens: 6, stopAtEos: false }));
    } finally {
      await here.close();
    }
    // Only the exported entry points: the package's insides are not importable by path.
    const deep = run(
      process.execPath,
      ['--input-type=module', '-e', "await import('moetier/dist/src/engine/engine.js')"],
      app,
    );
    expect(deep.stderr).toMatch(/ERR_PACKAGE_PATH_NOT_EXPORTED/);
  });

  it('type-checks an app against the exported types (TuneOptions, CalibrationSnapshot, TierStats)', () => {
    writeFileSync(
      path.join(app, 'check.ts'),
      `import { openEngine, type CalibrationSnapshot, type Engine, type TierStats, type TuneOptions } from 'moetier';
import { loadTelemetry, type Telemetry } from 'moetier/otel';
const tune: TuneOptions = { residentSlotsPerLayer: 4 };
// @ts-expect-error a string is not a slot count: the types are real, not any
const wrong: TuneOptions = { residentSlotsPerLayer: 'four' };
export async function use(): Promise<[Engine, TierStats | undefined, CalibrationSnapshot | undefined, Telemetry]> {
  const engine = await openEngine({ model: 'm.gguf', resident: 0.5 });
  engine.tune(tune);
  let last: CalibrationSnapshot | undefined;
  engine.calibration$().subscribe((s) => (last = s));
  return [engine, engine.tierStats(), last, await loadTelemetry()];
}
void wrong;
`,
    );
    writeFileSync(
      path.join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          target: 'ES2022',
          types: ['node'],
          typeRoots: [path.join(repo, 'node_modules/@types')],
        },
        files: ['check.ts'],
      }),
    );
    const r = run(process.execPath, [path.join(repo, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], app);
    expect(r.stdout + r.stderr).toBe('');
    expect(r.code).toBe(0);
  });

  it('runs moetier without the SDK; asking for telemetry names the packages to install', async () => {
    const model = await tinyModel(dir, 'q8_0', 4);
    const bin = path.join(app, 'node_modules/.bin/moetier');
    const plain = run(bin, ['run', '--model', model, '--prompt', 'red', '-n', '3', '--json'], app);
    expect(plain.code).toBe(0);
    expect(JSON.parse(plain.stdout.trim().split('\n').at(-1)!).generatedTokens).toBe(3);
    const traced = run(
      bin,
      ['run', '--model', model, '--prompt', 'red', '-n', '3', '--trace-file', path.join(dir, 't.json')],
      app,
    );
    expect(traced.code).toBe(1);
    expect(traced.stderr).toMatch(
      /trace file .* needs the OpenTelemetry SDK, which is not installed \(@opentelemetry\/[a-z-]+ not found\): npm install @opentelemetry\/sdk-node /,
    );
    const lib = run(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const o = await import('moetier/otel'); const t = await o.loadTelemetry(); console.log(t.active); await o.loadTelemetry({ traceFile: 'x.json' }).catch((e) => console.log(e.code));",
      ],
      app,
    );
    expect(lib.stdout.trim().split('\n')).toEqual(['false', 'E_TELEMETRY_UNAVAILABLE']);
  });
});

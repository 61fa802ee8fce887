import path from 'node:path';
import { defineConfig } from 'vitest/config';

// *.slow.test.ts (the pack-install test builds the native addon, the cross-build test compiles native/
// for arm64, the bad-invocations test spawns dozens of CLIs) runs after everything else, on
// its own: a C++ build on both cores would skew the timing tests running beside it.
const slow = 'tests/**/*.slow.test.ts';
// tests/device/: the CUDA suite, which needs a GPU. Only `npm run device-check` runs it (with
// MOETIER_DEVICE=cuda, as the project "device"); the default projects never include it.
const device = 'tests/device/**';
// MOETIER_DEVICE=cuda-sim runs the same suite on the simulated runtime: a dry run without a GPU.
const deviceKind = process.env.MOETIER_DEVICE;
const deviceProjects = deviceKind === 'cuda' || deviceKind === 'cuda-sim' ? [{ extends: true, test: { name: 'device', include: ['tests/device/**/*.test.ts'] } }] : [];

// The backend, pool, tier and read engine tests run a second time on the debug build (npm run build:native:debug,
// which npm test runs first): the same assertions, with the native MT_ASSERT invariants live, so a
// broken invariant aborts the test's fork instead of passing unseen. MOETIER_ADDON makes
// src/native/binding.ts load it; debug-asserts.test.ts checks that this project really has it.
const debugAddon = path.resolve(import.meta.dirname, 'native/build-debug/Release/moetier.node');
const onDebugBuild = [
  'tests/native/backend*.test.ts',
  'tests/native/pool.test.ts',
  'tests/native/tier*.test.ts',
  'tests/native/io.test.ts',
  'tests/native/debug-asserts.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Two cores: one fork per core keeps native threads from oversubscribing.
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default', 'json'],
    outputFile: { json: '.ci/last-results.json' },
    projects: [
      { extends: true, test: { name: 'tests', include: ['tests/**/*.test.ts'], exclude: [slow, device], sequence: { groupOrder: 0 } } },
      {
        extends: true,
        test: {
          name: 'debug-asserts',
          include: onDebugBuild,
          env: { MOETIER_ADDON: debugAddon, MOETIER_EXPECT_DEBUG_ASSERTS: '1' },
          sequence: { groupOrder: 0 },
        },
      },
      { extends: true, test: { name: 'slow', include: [slow], sequence: { groupOrder: 1 } } },
      ...deviceProjects,
    ],
  },
});

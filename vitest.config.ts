import { defineConfig } from 'vitest/config';

// *.slow.test.ts (the pack-install test builds the native addon, the cross-build test compiles native/
// for arm64, the bad-invocations test spawns dozens of CLIs) runs after everything else, on
// its own: a C++ build on both cores would skew the timing tests running beside it.
const slow = 'tests/**/*.slow.test.ts';

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
      { extends: true, test: { name: 'tests', include: ['tests/**/*.test.ts'], exclude: [slow], sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: 'slow', include: [slow], sequence: { groupOrder: 1 } } },
    ],
  },
});

/**
 * The import rules of ARCHITECTURE.md, checked: no cycles, nothing in src/ imports tests/, imports
 * point one way (engine -> actors -> pure logic: actors import no engine or stream module; the
 * policies, the model and the core import no actor handle, engine, stream or CLI module),
 * only src/native/binding.ts loads the addon, the reference and the policies stay pure (the policies'
 * one native door, src/native/policy.ts, holds pure functions only),
 * and libraries trace through @opentelemetry/api only.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');

function sourceFiles(dir: string): string[] {
  const abs = path.join(root, dir);
  let entries: string[];
  try {
    entries = readdirSync(abs);
  } catch {
    return [];
  }
  return entries.flatMap((name) => {
    const rel = path.join(dir, name);
    if (statSync(path.join(root, rel)).isDirectory()) return sourceFiles(rel);
    return rel.endsWith('.ts') ? [rel] : [];
  });
}

function importsOf(file: string): string[] {
  const text = readFileSync(path.join(root, file), 'utf8');
  const specs = [...text.matchAll(/(?:import|export)[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)];
  return specs.map((m) => m[1] ?? m[2]);
}

function resolveLocal(from: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  return path.normalize(path.join(path.dirname(from), spec)).replace(/\.js$/, '.ts');
}

/**
 * Static imports (`import ... from`, `export ... from`, type-only ones too: the .d.ts files an
 * app type-checks against keep them): what loading or type-checking a module needs at once.
 */
function staticImportsOf(file: string): string[] {
  const text = readFileSync(path.join(root, file), 'utf8');
  return [...text.matchAll(/^(?:import|export)[^'"]*?from\s+['"]([^'"]+)['"]/gm)].map((m) => m[1]);
}

const files = [...sourceFiles('src'), ...sourceFiles('otel')];
const graph = new Map(files.map((f) => [f, importsOf(f)]));

describe('import rules', () => {
  it('finds the sources', () => {
    expect(files.length).toBeGreaterThan(10);
  });

  it('has no import cycles in src/', () => {
    const state = new Map<string, 'visiting' | 'done'>();
    const cycles: string[] = [];
    const visit = (file: string, trail: string[]) => {
      if (state.get(file) === 'done') return;
      if (state.get(file) === 'visiting') {
        cycles.push([...trail.slice(trail.indexOf(file)), file].join(' -> '));
        return;
      }
      state.set(file, 'visiting');
      for (const spec of graph.get(file) ?? []) {
        const target = resolveLocal(file, spec);
        if (target && graph.has(target)) visit(target, [...trail, file]);
      }
      state.set(file, 'done');
    };
    for (const f of files) visit(f, []);
    expect(cycles).toEqual([]);
  });

  it('keeps layers apart', () => {
    const violations: string[] = [];
    for (const [file, specs] of graph) {
      for (const spec of specs) {
        const target = resolveLocal(file, spec) ?? spec;
        if (target.startsWith('tests/')) violations.push(`${file} imports tests: ${spec}`);
        if (spec.endsWith('.node') || (spec.includes('native/build') && file !== 'src/native/binding.ts'))
          violations.push(`${file} loads the addon`);
        if (file.startsWith('src/reference/') && target.startsWith('src/native/'))
          violations.push(`${file}: the reference must not use native code`);
        // The one door: src/native/policy.ts, the policy's pure native verbs (the code the tier runs at need).
        if (
          file.startsWith('src/tiers/') &&
          ((target.startsWith('src/native/') &&
            !['src/native/policy.ts', 'src/native/constants.ts'].includes(target)) ||
            spec.startsWith('node:'))
        ) {
          violations.push(`${file}: policies are pure (no native, no node: I/O): ${spec}`);
        }
        if (file.startsWith('src/streams/') && target.startsWith('src/native/'))
          violations.push(`${file}: streams do not reach into kernels`);
        // The diagnostics verbs (src/native/diagnostics.ts) are for tests and benches: the library names none.
        if (target === 'src/native/diagnostics.ts' && file !== 'src/native/diagnostics.ts')
          violations.push(`${file}: the library calls no diagnostics verb (${spec})`);
        // One way: engine -> actors -> pure logic (src/tiers, the actors' logic.ts / messages.ts, src/model, src/core).
        const layerOf = (f: string) => f.split('/').slice(0, 2).join('/');
        if (file.startsWith('src/actors/') && ['src/engine', 'src/streams', 'src/cli'].includes(layerOf(target)))
          violations.push(`${file}: actors do not import upward (${spec})`);
        if (['src/tiers', 'src/model', 'src/core', 'src/routes'].includes(layerOf(file))) {
          const actorHandle = target.startsWith('src/actors/') && !/\/(logic|messages)\.ts$/.test(target);
          if (actorHandle || ['src/engine', 'src/streams', 'src/cli'].includes(layerOf(target)))
            violations.push(`${file}: pure logic imports no actor, engine or CLI (${spec})`);
        }
        if (file.startsWith('src/') && spec.startsWith('@opentelemetry/') && spec !== '@opentelemetry/api') {
          violations.push(`${file}: libraries trace through @opentelemetry/api only (${spec})`);
        }
      }
    }
    expect(violations).toEqual([]);
  });

  it('loads and type-checks the library, the CLI and moetier/otel without the OpenTelemetry SDK (an optional peer, imported by otel/load.ts when asked for)', () => {
    const reached = new Set<string>();
    const sdk: string[] = [];
    const visit = (file: string, trail: string[]) => {
      if (reached.has(file)) return;
      reached.add(file);
      for (const spec of staticImportsOf(file)) {
        const target = resolveLocal(file, spec);
        if (target && graph.has(target)) visit(target, [...trail, file]);
        else if (spec.startsWith('@opentelemetry/') && spec !== '@opentelemetry/api')
          sdk.push(`${[...trail, file].join(' -> ')} -> ${spec}`);
      }
    };
    for (const entry of ['src/index.ts', 'src/cli/main.ts', 'otel/index.ts']) visit(entry, []);
    expect(reached.has('src/cli/commands/run.ts') && reached.has('otel/load.ts')).toBe(true);
    expect(reached.has('otel/setup.ts')).toBe(false);
    expect(sdk).toEqual([]);
    expect(readFileSync(path.join(root, 'otel/load.ts'), 'utf8')).toContain("await import('./setup.js')");
  });
});

describe('native include rules', () => {
  /** "..." includes of the C++ files under native/<dir>. */
  function nativeIncludes(dir: string): Array<{ file: string; include: string }> {
    const abs = path.join(root, 'native', dir);
    return readdirSync(abs)
      .filter((n) => /\.(cc|h)$/.test(n))
      .flatMap((n) =>
        [...readFileSync(path.join(abs, n), 'utf8').matchAll(/#include\s+"([^"]+)"/g)].map((m) => ({
          file: `native/${dir}/${n}`,
          include: m[1],
        })),
      );
  }
  it("the forward pass includes nothing of the tier, the tier nothing of the forward pass, the addon only the tier's header", () => {
    const bad = [
      ...nativeIncludes('cpu').filter((i) => i.include.includes('tier/')),
      ...nativeIncludes('tier').filter((i) => i.include.includes('cpu/')),
      ...nativeIncludes('addon').filter((i) => i.include.includes('tier/')),
    ];
    expect(bad).toEqual([]);
    // The tier's C ABI is a header of its own beside mt_backend.h.
    expect(nativeIncludes('addon').some((i) => i.include === 'mt_tier.h')).toBe(true);
  });
  it('the read engine stands alone behind mt_io.h: the addon reaches it only through that header', () => {
    const ownOrAbi = (i: { include: string }) => /^(io\.h|mt_io\.h|mt_assert\.h|mt_clock\.h)$/.test(i.include);
    expect(nativeIncludes('io').filter((i) => !ownOrAbi(i))).toEqual([]);
    expect(nativeIncludes('addon').filter((i) => i.include.includes('io/') || i.include === 'io.h')).toEqual([]);
    expect(nativeIncludes('addon').some((i) => i.include === 'mt_io.h')).toBe(true);
  });
});

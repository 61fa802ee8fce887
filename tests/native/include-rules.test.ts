/**
 * The native include rules, checked on every #include line (quoted or angled) of the C++ files:
 *
 *   native/tier    its own headers (native/tier), the C ABI (native/include) and system headers:
 *                  the tier reaches a backend only through include/mt_backend.h (device compute is
 *                  the interface's optional run_experts entry), never a kind's own header
 *   native/addon   its own headers (native/addon), the C ABI (native/include), node-addon-api and
 *                  system headers: no cpu/, disk/, cuda/ or backend/ internals
 *
 * A quoted include names a file in the including file's own folder or in native/include (the one
 * include path the build adds); a path (`../cpu/pool.h`, `cuda/x.h`) or a name found in neither
 * breaks the rule. An angled include is a system header: one that names a path with `..` or a
 * header of native/ breaks it too.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const native = path.resolve(import.meta.dirname, '../../native');
const abi = path.join(native, 'include');

interface Include {
  file: string;
  line: number;
  name: string;
  quoted: boolean;
}

/** The #include lines of a source text (comment lines are skipped by the anchor). */
function includesOf(file: string, text: string): Include[] {
  return text.split('\n').flatMap((line, i) => {
    const m = /^\s*#\s*include\s*(?:"([^"]+)"|<([^>]+)>)/.exec(line);
    return m ? [{ file, line: i + 1, name: m[1] ?? m[2], quoted: m[1] !== undefined }] : [];
  });
}

function sources(dir: string): string[] {
  return readdirSync(path.join(native, dir))
    .filter((n) => /\.(cc|h)$/.test(n))
    .map((n) => `${dir}/${n}`);
}

/** Every native header outside native/include, by file name: what an angled include must not name. */
function internalHeaders(): Set<string> {
  const out = new Set<string>();
  const walk = (dir: string) => {
    for (const e of readdirSync(path.join(native, dir), { withFileTypes: true })) {
      const rel = path.join(dir, e.name);
      if (e.isDirectory()) {
        if (!/^build/.test(e.name) && rel !== 'include') walk(rel);
      } else if (/\.(h|cuh)$/.test(e.name)) out.add(e.name);
    }
  };
  walk('.');
  return out;
}

/** The includes of `dir`'s files that break its rule, as "file:line: #include name". */
function violations(dir: string, files: Array<{ file: string; text: string }>, internal: Set<string>): string[] {
  const own = path.join(native, dir);
  return files.flatMap(({ file, text }) =>
    includesOf(file, text)
      .filter((inc) => {
        if (inc.name.includes('..')) return true;
        if (!inc.quoted) return internal.has(path.basename(inc.name)) && !existsSync(path.join(abi, inc.name));
        if (inc.name.includes('/')) return true;
        return !existsSync(path.join(own, inc.name)) && !existsSync(path.join(abi, inc.name));
      })
      .map((inc) => `native/${inc.file}:${inc.line}: #include ${inc.quoted ? `"${inc.name}"` : `<${inc.name}>`}`),
  );
}

function read(dir: string): Array<{ file: string; text: string }> {
  return sources(dir).map((file) => ({ file, text: readFileSync(path.join(native, file), 'utf8') }));
}

describe('native include rules', () => {
  const internal = internalHeaders();

  it('finds the sources and the C ABI', () => {
    expect(sources('tier').length).toBeGreaterThan(10);
    expect(sources('addon').length).toBeGreaterThan(10);
    expect(existsSync(path.join(abi, 'mt_backend.h'))).toBe(true);
    expect(internal.has('backend.h')).toBe(true);
  });

  it('native/tier includes only its own headers, native/include and system headers', () => {
    expect(violations('tier', read('tier'), internal)).toEqual([]);
  });

  it('native/addon includes only its own headers, native/include and system headers', () => {
    expect(violations('addon', read('addon'), internal)).toEqual([]);
  });

  it('the tier names no backend kind: device compute goes through the interface', () => {
    const kinds = read('tier').flatMap(({ file, text }) =>
      includesOf(file, text).filter((i) => /mt_backend_(cuda|disk)|cuda_|disk_/.test(i.name)),
    );
    expect(kinds).toEqual([]);
    expect(read('tier').some(({ text }) => text.includes('mt_backend_interface('))).toBe(true);
  });

  it('fails on a reach into another folder: each kind of violation is caught', () => {
    const probe = (dir: string, line: string) =>
      violations(dir, [{ file: `${dir}/probe.cc`, text: `// probe\n${line}\n` }], internal);
    expect(probe('addon', '#include "../cpu/ops_elementwise.h"')).toEqual([
      'native/addon/probe.cc:2: #include "../cpu/ops_elementwise.h"',
    ]);
    expect(probe('addon', '#include "../cpu/x.h"')).toHaveLength(1);
    expect(probe('addon', '#include "../backend/backend.h"')).toHaveLength(1);
    expect(probe('tier', '#include "../cuda/mt_backend_cuda.h"')).toHaveLength(1);
    expect(probe('tier', '#  include "cuda/cuda_backend.h"')).toHaveLength(1);
    expect(probe('addon', '#include "tier.h"')).toHaveLength(1); // another folder's header by bare name
    expect(probe('tier', '#include "errors.h"')).toHaveLength(1); // the addon's, not the tier's
    expect(probe('addon', '#include <../cpu/pool.h>')).toHaveLength(1);
    expect(probe('addon', '#include <backend.h>')).toHaveLength(1); // an internal header by the angled form
    // What the rules allow.
    expect(probe('addon', '#include "mt_backend.h"')).toEqual([]);
    expect(probe('addon', '#include "errors.h"')).toEqual([]);
    expect(probe('tier', '#include "tier_reads.h"')).toEqual([]);
    expect(probe('addon', '#include <napi.h>')).toEqual([]);
    expect(probe('tier', '#include <sys/mman.h>')).toEqual([]);
  });
});

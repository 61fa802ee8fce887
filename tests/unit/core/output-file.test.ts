/**
 * Outputs never destroy what the user did not name as output (issue 10): a device, a folder, a
 * FIFO or an input file as an output path is refused before any work; writes go through a unique
 * temporary file beside the target.
 */
import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../../src/core/errors.js';
import { checkOutputPath, ensureDir, tempPathBeside } from '../../../src/core/output-file.js';
import { parseGguf } from '../../../src/model/gguf/reader.js';
import { writeGguf } from '../../../src/model/gguf/writer.js';
import { readFile } from 'node:fs/promises';

const dir = mkdtempSync(path.join(tmpdir(), 'moetier-out-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function refusal(fn: () => void): InvalidOptionError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionError);
    return err as InvalidOptionError;
  }
  throw new Error('expected a refusal');
}

describe('checkOutputPath', () => {
  it('accepts a new path and a regular file', () => {
    checkOutputPath(path.join(dir, 'new.json'), '--out');
    writeFileSync(path.join(dir, 'old.json'), '{}');
    checkOutputPath(path.join(dir, 'old.json'), '--out');
  });

  it('refuses a character device, a folder, a FIFO and a missing folder, naming the flag and the kind', () => {
    expect(refusal(() => checkOutputPath('/dev/null', '--out')).message).toMatch(
      /^option --out: expected a regular file .*character device/,
    );
    mkdirSync(path.join(dir, 'folder'));
    expect(refusal(() => checkOutputPath(path.join(dir, 'folder'), '--trace-file')).message).toContain('a directory');
    const fifo = path.join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    expect(refusal(() => checkOutputPath(fifo, '--trace-routes')).message).toContain('a FIFO');
    expect(refusal(() => checkOutputPath(path.join(dir, 'no', 'such', 'x'), '--out')).message).toContain(
      'an existing directory',
    );
    expect(statSync('/dev/null').isCharacterDevice()).toBe(true);
  });

  it('refuses an input file as an output, whatever its spelling (a hard link, a relative path)', () => {
    const model = path.join(dir, 'model.gguf');
    writeFileSync(model, 'weights');
    const link = path.join(dir, 'alias.gguf');
    linkSync(model, link);
    for (const out of [model, link, path.relative(process.cwd(), model)]) {
      expect(refusal(() => checkOutputPath(out, '--trace-file', [model])).message).toContain(
        `a file other than the input ${model}`,
      );
    }
  });

  it('gives every caller its own temporary path', () => {
    const target = path.join(dir, 'x.gguf');
    const paths = new Set(Array.from({ length: 100 }, () => tempPathBeside(target)));
    expect(paths.size).toBe(100);
    for (const p of paths) expect(path.dirname(p)).toBe(dir);
  });
});

describe('writeGguf output', () => {
  it('two writers to one path each rename a whole file: the result is one of them, and no temporary is left', async () => {
    const target = path.join(dir, 'race.gguf');
    const tensor = (fill: number) => [
      { name: 't', type: 'F32' as const, dims: [4096], data: () => new Uint8Array(4 * 4096).fill(fill) },
    ];
    await Promise.all([
      writeGguf(target, [['general.name', { type: 'string', value: 'first' }]], tensor(1)),
      writeGguf(target, [['general.name', { type: 'string', value: 'second' }]], tensor(2)),
    ]);
    const file = parseGguf(new Uint8Array(await readFile(target)), target);
    expect(['first', 'second']).toContain(file.metadata.get('general.name'));
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('refuses to replace a character device and leaves nothing behind', async () => {
    await expect(writeGguf('/dev/null', [], [])).rejects.toThrow(/character device/);
    expect(statSync('/dev/null').isCharacterDevice()).toBe(true);
  });
});

describe('ensureDir', () => {
  it('makes missing levels, accepts an existing folder, and refuses /proc or a file at once (recursive mkdir spun there)', () => {
    const deep = path.join(dir, 'a', 'b', 'c');
    ensureDir(deep, 'MOETIER_CACHE_DIR');
    expect(statSync(deep).isDirectory()).toBe(true);
    ensureDir(deep, 'MOETIER_CACHE_DIR');
    const started = Date.now();
    expect(() => ensureDir('/proc/nope/deeper', 'MOETIER_CACHE_DIR')).toThrow(
      /option MOETIER_CACHE_DIR: expected a folder that can be created \(\/proc\/nope: ENOENT\)/,
    );
    expect(Date.now() - started).toBeLessThan(1000);
    writeFileSync(path.join(dir, 'plain'), 'x');
    expect(() => ensureDir(path.join(dir, 'plain', 'sub'), '--heat')).toThrow(
      /option --heat: expected a folder path \(.*plain is a regular file\)/,
    );
  });
});

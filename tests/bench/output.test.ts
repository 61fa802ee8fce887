/**
 * Bench runs do not dirty the tree: a local run's results go to bench/results/local/
 * (git-ignored) and leave the README tables alone; --update-results writes the committed
 * files. And every bench script answers --help (exit 0) and a bad flag (exit 2).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
// @ts-expect-error plain .mjs bench module without declarations
import { resultsTarget, updateReadme, writeResults } from '../../bench/lib/output.mjs';

const repo = path.resolve(import.meta.dirname, '../..');
const scratch = mkdtempSync(path.join(tmpdir(), 'moetier-bench-out-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Target {
  dir: URL;
  readme?: URL;
}

describe('bench results', () => {
  it('go to the git-ignored bench/results/local/ unless asked to update the committed ones', () => {
    const local = resultsTarget(false) as Target;
    const update = resultsTarget(true) as Target;
    expect(fileURLToPath(local.dir)).toBe(path.join(repo, 'bench', 'results', 'local') + path.sep);
    expect(local.readme).toBeUndefined();
    expect(fileURLToPath(update.dir)).toBe(path.join(repo, 'bench', 'results') + path.sep);
    expect(fileURLToPath(update.readme!)).toBe(path.join(repo, 'bench', 'README.md'));
    // git agrees: the local folder is ignored, the committed results are not.
    const ignored = (rel: string): boolean => spawnSync('git', ['check-ignore', '-q', rel], { cwd: repo }).status === 0;
    expect(ignored('bench/results/local/decode.json')).toBe(true);
    expect(ignored('bench/results/decode.json')).toBe(false);
  });

  it('write the JSON and the README table only where the target says', () => {
    const base = pathToFileURL(`${scratch}/`);
    const readme = path.join(scratch, 'README.md');
    const original = 'intro\n<!-- tier-results:begin -->\nold table\n<!-- tier-results:end -->\n';
    writeFileSync(readme, original);
    const quiet = { write: process.stderr.write };
    process.stderr.write = () => true; // writeResults says where the file went
    try {
      writeResults(resultsTarget(false, base), 'tier', '{"local":true}\n');
      updateReadme(resultsTarget(false, base), 'tier', 'new table');
      expect(readFileSync(path.join(scratch, 'results', 'local', 'tier.json'), 'utf8')).toBe('{"local":true}\n');
      expect(existsSync(path.join(scratch, 'results', 'tier.json'))).toBe(false);
      expect(readFileSync(readme, 'utf8')).toBe(original);

      writeResults(resultsTarget(true, base), 'tier', '{"local":false}\n');
      updateReadme(resultsTarget(true, base), 'tier', 'new table');
      expect(readFileSync(path.join(scratch, 'results', 'tier.json'), 'utf8')).toBe('{"local":false}\n');
      expect(readFileSync(readme, 'utf8')).toContain(
        '<!-- tier-results:begin -->\nnew table\n<!-- tier-results:end -->',
      );
    } finally {
      process.stderr.write = quiet.write;
    }
  });
});

describe('bench scripts', () => {
  const scripts = [
    'run',
    'decode',
    'tier',
    'replan',
    'parity',
    'kernels',
    'threads',
    'forward-smoke',
    'disk-probe',
    'disk-uploads',
    'predict',
    'routing',
  ];
  const node = (args: string[]) => spawnSync(process.execPath, args, { cwd: repo, encoding: 'utf8', timeout: 30_000 });

  it.each(scripts)('%s.mjs --help prints its usage and exits 0', (name) => {
    const r = node([`bench/${name}.mjs`, '--help']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^usage: /);
    expect(r.stdout).toContain('--update-results');
  });

  it('refuse an unknown flag with exit code 2, naming it', () => {
    for (const args of [
      ['bench/replan.mjs', '--bogus'],
      ['bench/kernels.mjs', '--bogus'],
      ['bench/run.mjs', 'tier', '--bogus'],
    ]) {
      const r = node(args);
      expect({ args, status: r.status }).toEqual({ args, status: 2 });
      expect(r.stderr).toContain('option --bogus');
    }
  });
});

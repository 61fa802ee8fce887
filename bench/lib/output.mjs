/**
 * Where a bench run's results go. A local run must not dirty the tree: its JSON goes to
 * bench/results/local/ (git-ignored) and the README tables stay as committed (the table is
 * printed instead). `--update-results` writes bench/results/<name>.json and the README table,
 * for a run whose figures are meant to be committed.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { writeReadmeSection } from './readme.mjs';

const benchDir = new URL('../', import.meta.url);

/** { dir, readme }: readme is undefined for a local run (the committed tables are left alone). */
export function resultsTarget(updateResults, base = benchDir) {
  return updateResults
    ? { dir: new URL('results/', base), readme: new URL('README.md', base) }
    : { dir: new URL('results/local/', base), readme: undefined };
}

export function resultsUrl(target, name) {
  return new URL(`${name}.json`, target.dir);
}

/** Writes <dir>/<name>.json; returns its path (printed on stderr so a user finds the file). */
export function writeResults(target, name, text) {
  mkdirSync(target.dir, { recursive: true });
  const url = resultsUrl(target, name);
  writeFileSync(url, text);
  const file = fileURLToPath(url);
  process.stderr.write(
    `results: ${file}${target.readme ? ' and the README table' : ' (local; --update-results writes the committed ones)'}\n`,
  );
  return file;
}

/** The README section, when this run updates the committed tables. */
export function updateReadme(target, section, body) {
  if (target.readme) writeReadmeSection(target.readme, section, body);
}

/** An earlier results file of this target, or undefined. */
export function readResults(target, name) {
  try {
    return JSON.parse(readFileSync(resultsUrl(target, name), 'utf8'));
  } catch (err) {
    if (err.code === 'ENOENT') return undefined;
    throw err;
  }
}

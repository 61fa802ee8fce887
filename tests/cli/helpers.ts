/** Shared by the CLI tests: the built CLI (dist/, as users run it) in a child process. */
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import path from 'node:path';

export const repoRoot = path.resolve(import.meta.dirname, '../..');
export const cliMain = path.join(repoRoot, 'dist', 'src', 'cli', 'main.js');

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
}

/** The environment of the test run without the cache variables, plus `extra`. */
export function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.MOETIER_CACHE_DIR;
  delete env.XDG_CACHE_HOME;
  return { ...env, ...extra };
}

export function runCli(args: string[], options: SpawnSyncOptions & { main?: string } = {}): CliResult {
  const { main = cliMain, ...spawnOptions } = options;
  const r = spawnSync(process.execPath, [main, ...args], { encoding: 'utf8', timeout: 60_000, ...spawnOptions });
  if (r.error) throw r.error;
  return { status: r.status, stdout: String(r.stdout), stderr: String(r.stderr) };
}

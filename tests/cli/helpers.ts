/** Shared by the CLI tests: the built CLI (dist/, as users run it) in a child process. */
import { spawn, spawnSync, type ChildProcess, type SpawnSyncOptions } from 'node:child_process';
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

/** cleanEnv without the test run's OTEL_* variables either, plus `extra`. */
export function cleanOtelEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(cleanEnv()).filter(([k]) => !k.startsWith('OTEL_')));
  return { ...env, ...extra };
}

export interface SpawnedCli extends CliResult {
  signal: NodeJS.Signals | null;
  wallMs: number;
}

/**
 * runCli without blocking this process (servers the test runs keep answering), timed;
 * `onStdout` sees the output as it comes (to send a signal mid-run).
 */
export function spawnCli(
  args: string[],
  env: NodeJS.ProcessEnv,
  onStdout?: (soFar: string, child: ChildProcess) => void,
): Promise<SpawnedCli> {
  const started = performance.now();
  const child = spawn(process.execPath, [cliMain, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
    onStdout?.(stdout, child);
  });
  child.stderr!.on('data', (d: Buffer) => void (stderr += d.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (status, signal) =>
      resolve({ status, signal, stdout, stderr, wallMs: performance.now() - started }),
    );
  });
}

/** Runs the built CLI (dist/) as a user would: a child process, its stdout, stderr, exit code and wall time. */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';

export const cliMain = path.resolve(import.meta.dirname, '../../dist/src/cli/main.js');

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  wallMs: number;
}

/** Spawns `node dist/src/cli/main.js ...args`; `onStdout` sees the output as it comes (e.g. to send a signal). */
export function runCli(args: string[], env: NodeJS.ProcessEnv, onStdout?: (soFar: string, child: ChildProcess) => void): Promise<CliResult> {
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
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr, wallMs: performance.now() - started }));
  });
}

/** The environment without any OTEL_* variable of the caller's, plus `vars`. */
export function envWith(vars: Record<string, string>): NodeJS.ProcessEnv {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')));
  return { ...env, ...vars };
}

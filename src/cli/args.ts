/** Thin typed wrapper over node:util parseArgs: unknown flags and bad numbers are InvalidOptionErrors. */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { InvalidOptionError } from '../core/errors.js';

export type Options = NonNullable<ParseArgsConfig['options']>;

export function parse(argv: string[], options: Options): Record<string, string | boolean | undefined> {
  try {
    const { values } = parseArgs({ args: argv, options, allowPositionals: false, strict: true });
    return values as Record<string, string | boolean | undefined>;
  } catch (err) {
    throw new InvalidOptionError('arguments', 'flags listed by --help', (err as Error).message);
  }
}

export function requireString(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== 'string' || v.length === 0) throw new InvalidOptionError(`--${name}`, 'a value', v);
  return v;
}

export function intOption(values: Record<string, unknown>, name: string, fallback: number, min = -Infinity, max = Infinity): number {
  const v = values[name];
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < min || n > max) throw new InvalidOptionError(`--${name}`, `an integer in [${min}, ${max}]`, v);
  return n;
}

export function numberOption(values: Record<string, unknown>, name: string, fallback: number): number {
  const v = values[name];
  if (v === undefined) return fallback;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new InvalidOptionError(`--${name}`, 'a number', v);
  return n;
}

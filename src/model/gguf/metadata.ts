/**
 * Typed access to parsed GGUF metadata. The reader keeps each value's JS type
 * (integers as numbers, or bigint past 2^53), so a key holding the wrong kind of
 * value is refused here with a GgufFormatError naming the key and what it should hold.
 */
import { GgufFormatError } from '../../core/errors.js';
import type { GgufFile, GgufScalar, GgufValue } from '../types.js';

function describe(value: GgufValue): string {
  if (Array.isArray(value)) return `an array of ${value.length}`;
  if (typeof value === 'string')
    return `string ${JSON.stringify(value.length > 40 ? value.slice(0, 40) + '…' : value)}`;
  return `${typeof value} ${String(value)}`;
}

function wrong(file: GgufFile, key: string, expected: string, value: GgufValue | undefined): never {
  const got = value === undefined ? 'the key is missing' : `got ${describe(value)}`;
  throw new GgufFormatError(file.path, `key ${key}`, `${expected}, but ${got}`);
}

/** An unsigned integer in [min, max]; `fallback` when the key is absent (required when undefined). */
export function metaUint(
  file: GgufFile,
  key: string,
  range: { min?: number; max?: number; fallback?: number } = {},
): number {
  const { min = 0, max = 0xffffffff, fallback } = range;
  const value = file.metadata.get(key);
  if (value === undefined && fallback !== undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    return wrong(file, key, `an unsigned integer from ${min} to ${max}`, value);
  }
  return value;
}

/** A finite float in (0, +inf) or [min, max]. */
export function metaFloat(
  file: GgufFile,
  key: string,
  range: { min?: number; max?: number; positive?: boolean; fallback?: number } = {},
): number {
  const value = file.metadata.get(key);
  if (value === undefined && range.fallback !== undefined) return range.fallback;
  const ok =
    typeof value === 'number' &&
    Number.isFinite(value) &&
    (!range.positive || value > 0) &&
    (range.max === undefined || value <= range.max);
  const expected = `a finite float${range.positive ? ' > 0' : ''}${range.max !== undefined ? ` and <= ${range.max}` : ''}`;
  if (!ok) return wrong(file, key, expected, value);
  return value;
}

export function metaString(file: GgufFile, key: string, fallback?: string): string {
  const value = file.metadata.get(key);
  if (value === undefined && fallback !== undefined) return fallback;
  if (typeof value !== 'string') return wrong(file, key, 'a string', value);
  return value;
}

export function metaBool(file: GgufFile, key: string, fallback: boolean): boolean {
  const value = file.metadata.get(key);
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') return wrong(file, key, 'a bool', value);
  return value;
}

export function metaStringArray(file: GgufFile, key: string): string[] {
  const value = file.metadata.get(key);
  if (!Array.isArray(value) || !value.every((v: GgufScalar) => typeof v === 'string')) {
    return wrong(file, key, 'an array of strings', value);
  }
  return value as string[];
}

/** An array of numbers of length `length` (or undefined when absent). */
export function metaNumberArray(file: GgufFile, key: string, length: number): number[] | undefined {
  const value = file.metadata.get(key);
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length !== length || !value.every((v: GgufScalar) => typeof v === 'number')) {
    return wrong(file, key, `an array of ${length} numbers`, value);
  }
  return value as number[];
}

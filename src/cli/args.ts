/**
 * Command-line flags over node:util parseArgs, in the spellings users type:
 *
 *   canonical long name (what --help lists and JSON fields follow)  --max-tokens
 *   optional short letter (llama-cli's habits)                       -n
 *   optional aliases (llama-cli's long spellings, --temp)            --n-predict
 *
 * Errors name the flag as the user typed it (-t, --temp), never the API option behind it
 * (threads, slotsPerLayer). A bad command line is an InvalidOptionError; main.ts exits 2 for it.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { InvalidOptionError } from '../core/errors.js';

export interface FlagSpec {
  type: 'string' | 'boolean';
  short?: string;
  aliases?: readonly string[];
  /** May be given more than once; every value is kept, in order (list()). */
  multiple?: boolean;
}
export type FlagSpecs = Record<string, FlagSpec>;

export class Args {
  constructor(
    private readonly values: ReadonlyMap<string, string | boolean>,
    /** The values of `multiple` flags, in the order given. */
    private readonly lists: ReadonlyMap<string, readonly string[]>,
    /** canonical name -> the spelling typed last (-t, --temp, --threads) */
    private readonly typed: ReadonlyMap<string, string>,
  ) {}

  /** The flag as the user typed it, or its canonical spelling when it was not given. */
  flag(name: string): string {
    return this.typed.get(name) ?? `--${name}`;
  }
  has(name: string): boolean {
    return this.values.has(name);
  }
  /** Every value of a `multiple` flag, in order ([] when not given). */
  list(name: string): readonly string[] {
    return this.lists.get(name) ?? [];
  }
  /** The canonical names of the flags given. */
  given(): string[] {
    return [...this.values.keys()];
  }
  bool(name: string): boolean {
    return this.values.get(name) === true;
  }
  string(name: string): string | undefined {
    const v = this.values.get(name);
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v.length === 0) throw new InvalidOptionError(this.flag(name), 'a value', v);
    return v;
  }
  requireString(name: string): string {
    const v = this.string(name);
    if (v === undefined) throw new InvalidOptionError(this.flag(name), 'a value (it is required)', undefined);
    return v;
  }
  int(name: string, fallback: number, min = -Infinity, max = Infinity): number {
    const v = this.values.get(name);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (v === '' || !Number.isInteger(n) || n < min || n > max)
      throw new InvalidOptionError(this.flag(name), integerRange(min, max), v);
    return n;
  }
  number(name: string, fallback: number): number {
    const v = this.values.get(name);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (v === '' || !Number.isFinite(n)) throw new InvalidOptionError(this.flag(name), 'a number', v);
    return n;
  }

  /**
   * Runs `fn`; an InvalidOptionError about an API option named in `apiToFlag` (slotsPerLayer ->
   * slots-per-layer) is thrown again under the flag the user typed, with the same expectation.
   */
  async renamingErrors<T>(apiToFlag: Readonly<Record<string, string>>, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof InvalidOptionError && Object.hasOwn(apiToFlag, err.option)) {
        throw new InvalidOptionError(this.flag(apiToFlag[err.option]), err.expected, err.got, { cause: err });
      }
      throw err;
    }
  }
}

export function parseFlags(argv: readonly string[], specs: FlagSpecs, command: string): Args {
  const options: NonNullable<ParseArgsConfig['options']> = {};
  const canonicalOf = new Map<string, string>();
  for (const [name, spec] of Object.entries(specs)) {
    options[name] = spec.short ? { type: spec.type, short: spec.short } : { type: spec.type };
    canonicalOf.set(name, name);
    for (const alias of spec.aliases ?? []) {
      options[alias] = { type: spec.type };
      canonicalOf.set(alias, name);
    }
  }
  const args = joinNegativeValues(argv, specs);
  let tokens;
  try {
    tokens = parseArgs({ args, options, strict: true, allowPositionals: false, tokens: true }).tokens;
  } catch (err) {
    throw usageError(err as Error & { code?: string }, args, specs, command);
  }
  const values = new Map<string, string | boolean>();
  const lists = new Map<string, string[]>();
  const typed = new Map<string, string>();
  for (const t of tokens) {
    if (t.kind !== 'option') continue;
    const name = canonicalOf.get(t.name)!;
    values.set(name, t.value ?? true); // the last spelling wins, as a repeated flag does
    if (specs[name].multiple && t.value !== undefined) lists.set(name, [...(lists.get(name) ?? []), t.value]);
    typed.set(name, t.rawName);
  }
  return new Args(values, lists, typed);
}

/** The spellings of every flag: canonical name -> ['--name', '-n', '--alias']. */
function spellings(specs: FlagSpecs): Map<string, string[]> {
  return new Map(
    Object.entries(specs).map(([name, s]) => [
      name,
      [`--${name}`, ...(s.short ? [`-${s.short}`] : []), ...(s.aliases ?? []).map((a) => `--${a}`)],
    ]),
  );
}

/**
 * `--seed -1` / `-s -1`: parseArgs calls a value that starts with a dash ambiguous; a negative
 * number after a flag that takes a value is that value (`--seed=-1`, `-s-1`).
 */
function joinNegativeValues(argv: readonly string[], specs: FlagSpecs): string[] {
  const takesValue = new Set(
    [...spellings(specs)].filter(([name]) => specs[name].type === 'string').flatMap(([, s]) => s),
  );
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = argv[i + 1];
    if (takesValue.has(a) && next !== undefined && /^-\d/.test(next)) {
      out.push(a.startsWith('--') ? `${a}=${next}` : `${a}${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

function usageError(
  err: Error & { code?: string },
  argv: readonly string[],
  specs: FlagSpecs,
  command: string,
): InvalidOptionError {
  const quoted = /'([^']+)'/.exec(err.message)?.[1];
  switch (err.code) {
    case 'ERR_PARSE_ARGS_UNKNOWN_OPTION':
      return new InvalidOptionError(quoted ?? 'arguments', `a flag listed by moetier ${command} --help`, quoted);
    case 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL':
      return new InvalidOptionError('arguments', 'flags only (quote text with spaces: -p "once upon a time")', quoted);
    case 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE': {
      const long = /--([a-z0-9-]+)/.exec(err.message)?.[1];
      const spelled = long === undefined ? undefined : typedSpelling(argv, specs, long);
      const isSwitch = long !== undefined && specsOf(specs, long)?.type === 'boolean';
      const expected = isSwitch
        ? 'no value (it is a switch)'
        : err.message.includes('ambiguous')
          ? `a value; write one that starts with a dash as --${long}=VALUE`
          : 'a value after it';
      return new InvalidOptionError(spelled ?? (long ? `--${long}` : 'arguments'), expected, undefined);
    }
    default:
      return new InvalidOptionError('arguments', `the flags listed by moetier ${command} --help`, err.message);
  }
}

function specsOf(specs: FlagSpecs, long: string): FlagSpec | undefined {
  return specs[long] ?? Object.values(specs).find((s) => s.aliases?.includes(long));
}

/** The spelling of flag `long` (canonical or alias) that the user typed last. */
function typedSpelling(argv: readonly string[], specs: FlagSpecs, long: string): string | undefined {
  const name = specs[long] ? long : Object.keys(specs).find((n) => specs[n].aliases?.includes(long));
  if (name === undefined) return undefined;
  const forms = spellings(specs).get(name)!;
  return argv
    .map((a) => a.split('=')[0])
    .filter((a) => forms.includes(a))
    .at(-1);
}

/** "an integer in [1, 64]", "an integer >= 1", or "an integer": what int() accepts, as users read it. */
function integerRange(min: number, max: number): string {
  if (Number.isFinite(min) && Number.isFinite(max)) return `an integer in [${min}, ${max}]`;
  if (Number.isFinite(min)) return `an integer >= ${min}`;
  if (Number.isFinite(max)) return `an integer <= ${max}`;
  return 'an integer';
}

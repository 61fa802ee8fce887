import { describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../../src/core/errors.js';
import { parseFlags, type FlagSpecs } from '../../../src/cli/args.js';
import { EXIT_FAILURE, EXIT_USAGE, exitCodeFor } from '../../../src/cli/exit-code.js';
import { GgufFormatError } from '../../../src/core/errors.js';

const specs: FlagSpecs = {
  threads: { type: 'string', short: 't' },
  temperature: { type: 'string', aliases: ['temp'] },
  seed: { type: 'string', short: 's' },
  json: { type: 'boolean' },
};

function refusal(argv: string[]): InvalidOptionError {
  try {
    parseFlags(argv, specs, 'run');
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidOptionError);
    return err as InvalidOptionError;
  }
  throw new Error(`accepted ${argv.join(' ')}`);
}

describe('command-line flags', () => {
  it('reads a flag under its canonical name whatever the spelling; the last spelling wins', () => {
    const a = parseFlags(['-t', '3', '--temp', '0.5', '--json'], specs, 'run');
    expect(a.int('threads', 2)).toBe(3);
    expect(a.number('temperature', 0)).toBe(0.5);
    expect(a.bool('json')).toBe(true);
    expect(a.has('seed')).toBe(false);
    expect(a.int('seed', 11)).toBe(11);
    const b = parseFlags(['--temperature', '0.1', '--temp=0.7', '--threads=4'], specs, 'run');
    expect(b.number('temperature', 0)).toBe(0.7);
    expect(b.flag('temperature')).toBe('--temp');
    expect(b.flag('threads')).toBe('--threads');
    expect(b.flag('seed')).toBe('--seed'); // not given: the canonical spelling
  });

  it('takes a negative number as the value of the flag before it', () => {
    expect(parseFlags(['--seed', '-1'], specs, 'run').int('seed', 0)).toBe(-1);
    const short = parseFlags(['-s', '-42', '-t', '2'], specs, 'run');
    expect(short.int('seed', 0)).toBe(-42);
    expect(short.flag('seed')).toBe('-s');
  });

  it('says the integer range as users read it (no "[-Infinity, Infinity]")', () => {
    const ints = (argv: string[], min?: number, max?: number) => () =>
      parseFlags(argv, specs, 'run').int('threads', 1, min, max);
    expect(ints(['-t', '-3'], 1)).toThrow(/^option -t: expected an integer >= 1, got "-3"$/);
    expect(ints(['-t', '99'], 1, 64)).toThrow(/^option -t: expected an integer in \[1, 64\], got "99"$/);
    expect(ints(['-t', 'x'])).toThrow(/^option -t: expected an integer, got "x"$/);
  });

  it('names the flag as typed in every refusal', () => {
    expect(refusal(['--colour', 'red']).option).toBe('--colour');
    expect(refusal(['-t']).option).toBe('-t');
    expect(refusal(['--temp']).option).toBe('--temp');
    expect(refusal(['--json=yes']).message).toMatch(/^option --json: expected no value/);
    expect(refusal(['stray']).message).toMatch(/^option arguments: expected flags only .*got "stray"/);
    const a = parseFlags(['-t', '0', '--temp', 'hot'], specs, 'run');
    expect(() => a.int('threads', 2, 1, 64)).toThrow(/^option -t: expected an integer in \[1, 64\], got "0"$/);
    expect(() => a.number('temperature', 0)).toThrow(/^option --temp: expected a number, got "hot"$/);
    expect(() => parseFlags([], specs, 'run').requireString('threads')).toThrow(/^option --threads: expected a value/);
  });

  it('says an API option error again under the flag the user typed', async () => {
    const a = parseFlags(['-t', '99'], specs, 'run');
    const err = await a
      .renamingErrors({ threads: 'threads' }, async () => {
        throw new InvalidOptionError('threads', 'an integer in [1, 64]', 99);
      })
      .catch((e: unknown) => e as InvalidOptionError);
    expect(err.message).toBe('option -t: expected an integer in [1, 64], got 99');
    const other = new InvalidOptionError('tune', 'x', 1);
    await expect(a.renamingErrors({ threads: 'threads' }, async () => Promise.reject(other))).rejects.toBe(other);
  });

  it('exits 2 for a bad command line, 1 for anything else', () => {
    expect(exitCodeFor(refusal(['--colour']))).toBe(EXIT_USAGE);
    expect(exitCodeFor(new GgufFormatError('m.gguf', 'magic', '"GGUF"'))).toBe(EXIT_FAILURE);
    expect(exitCodeFor(new TypeError('a bug'))).toBe(EXIT_FAILURE);
  });
});

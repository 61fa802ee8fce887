/** Command-line options of the bench scripts, checked where they enter. */
import { parseArgs } from 'node:util';
import { BenchError } from './errors.mjs';

export class BenchOptionError extends BenchError {
  constructor(option, expected, got) {
    super('E_INVALID_OPTION', `option --${option}: expected ${expected}, got ${JSON.stringify(got)}`);
    this.option = option;
  }
}

export function positiveInt(option, text, max = 1 << 20) {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1 || value > max)
    throw new BenchOptionError(option, `an integer in [1, ${max}]`, text);
  return value;
}

export function oneOf(option, text, allowed) {
  if (!allowed.includes(text)) throw new BenchOptionError(option, `one of ${allowed.join(', ')}`, text);
  return text;
}

/** Every bench takes these beside its own options. */
const common = {
  'update-results': {
    type: 'boolean',
    default: false,
    help: 'write the committed bench/results/<name>.json (and its bench/README.md table); default: bench/results/local/, git-ignored',
  },
  help: { type: 'boolean', short: 'h', default: false, help: 'this text' },
};

/**
 * parseArgs for a bench script: `options` are parseArgs options with a `help` line each.
 * Returns the values, or undefined after printing the usage for --help. An unknown flag is a
 * BenchOptionError (exit code 2 through runBenchMain).
 */
export function parseBenchArgs(argv, { usage, options }) {
  const all = { ...options, ...common };
  const config = Object.fromEntries(Object.entries(all).map(([name, { help, ...o }]) => [name, o]));
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: config, strict: true, allowPositionals: false }));
  } catch (err) {
    // parseArgs quotes the flag: "Unknown option '--x'", "Option '--rounds <value>' argument missing".
    const quoted = /'([^']+)'/.exec(err.message)?.[1] ?? '--arguments';
    const flag = quoted.split(/[ ,]/)[0];
    const unknown = err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION';
    throw new BenchOptionError(
      flag.replace(/^-+/, ''),
      unknown ? 'a flag listed by --help' : 'a value after it (or none, for a switch)',
      unknown ? flag : undefined,
    );
  }
  if (values.help) {
    process.stdout.write(`${usageText(usage, all)}\n`);
    return undefined;
  }
  return values;
}

export function usageText(usage, options) {
  const lines = Object.entries(options).map(([name, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : ''}--${name}${o.type === 'string' ? ' V' : ''}`;
    const fallback = o.type === 'string' && o.default !== undefined ? ` (default ${o.default})` : '';
    return `  ${flag.padEnd(24)} ${o.help ?? ''}${fallback}`;
  });
  return `${usage.trim()}\n\noptions:\n${lines.join('\n')}`;
}

/** The entry point of a script run directly: operating errors print their message, bugs a stack. */
export function runBenchMain(name, main, argv = process.argv.slice(2)) {
  main(argv).catch((error) => {
    process.stderr.write(`bench ${name} failed: ${error.code ? error.message : (error.stack ?? error)}\n`);
    process.exitCode = error.code === 'E_INVALID_OPTION' ? 2 : 1;
  });
}

/**
 * For a script whose body runs at the top level (kernels, threads, forward-smoke): --help prints
 * the usage and exits 0, a bad flag (or a value `spec.check(values)` refuses) prints why and
 * exits 2, before any native work starts.
 */
export function scriptArgs(spec, argv = process.argv.slice(2)) {
  let values;
  try {
    values = parseBenchArgs(argv, spec);
    if (values && spec.check) values = spec.check(values);
  } catch (error) {
    if (error.code !== 'E_INVALID_OPTION') throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(2);
  }
  if (!values) process.exit(0);
  return values;
}

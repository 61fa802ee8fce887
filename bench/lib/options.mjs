/** Command-line options of the bench scripts, checked where they enter. */
import { BenchError } from './errors.mjs';

export class BenchOptionError extends BenchError {
  constructor(option, expected, got) {
    super('E_INVALID_OPTION', `option --${option}: expected ${expected}, got ${JSON.stringify(got)}`);
    this.option = option;
  }
}

export function positiveInt(option, text, max = 1 << 20) {
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1 || value > max) throw new BenchOptionError(option, `an integer in [1, ${max}]`, text);
  return value;
}

export function oneOf(option, text, allowed) {
  if (!allowed.includes(text)) throw new BenchOptionError(option, `one of ${allowed.join(', ')}`, text);
  return text;
}

import { MoetierError } from '../core/errors.js';

/** A routing trace that does not follow its format; names the file, the line and what was expected. */
export class TraceFormatError extends MoetierError {
  readonly file: string;
  readonly line: number;
  constructor(file: string, line: number, where: string, expected: string) {
    super('E_TRACE_FORMAT', `${file}:${line}: ${where}: expected ${expected}`);
    this.file = file;
    this.line = line;
  }
}

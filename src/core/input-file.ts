/**
 * Input files the user names (a route trace, a heat file, a timing snapshot): refused by type and
 * size before any read, by the option that named them. A FIFO would block for ever, a directory
 * fails late with an untyped EISDIR, /dev/zero would never end.
 */
import { readFileSync, statSync, type Stats } from 'node:fs';
import { InvalidOptionError } from './errors.js';

/** The file's stats once it is known to be a readable regular file of at most maxBytes (else the option's error). */
export function checkInputFile(file: string, flag: string, what: string, maxBytes = Number.POSITIVE_INFINITY): Stats {
  let st: Stats;
  try {
    st = statSync(file);
  } catch (err) {
    throw new InvalidOptionError(
      flag,
      `a readable ${what} (${(err as NodeJS.ErrnoException).code ?? 'unreadable'})`,
      file,
    );
  }
  if (!st.isFile()) throw new InvalidOptionError(flag, `a ${what} (a regular file)`, file);
  if (st.size > maxBytes)
    throw new InvalidOptionError(flag, `a ${what} of at most ${maxBytes} bytes (this one has ${st.size})`, file);
  return st;
}

/** checkInputFile, then the file's text; a failed read (EIO from a /proc file, EACCES) is the option's error too. */
export function readInputText(file: string, flag: string, what: string, maxBytes: number): string {
  checkInputFile(file, flag, what, maxBytes);
  return readChecked(file, flag, what);
}

/** The text of a file already checked by checkInputFile, a read error named by the option. */
export function readChecked(file: string, flag: string, what: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new InvalidOptionError(
      flag,
      `a readable ${what} (${(err as NodeJS.ErrnoException).code ?? 'unreadable'} reading it)`,
      file,
      { cause: err },
    );
  }
}

/** Shared by the in-process CLI tests: `moetier run` refusing a command line with InvalidOptionError. */
import { expect } from 'vitest';
import { runCommand } from '../../src/cli/commands/run.js';
import { InvalidOptionError } from '../../src/core/errors.js';

/** The error `moetier run args` is refused with (the test fails if it runs instead, or throws anything else). */
export async function refusal(args: string[]): Promise<InvalidOptionError> {
  const err = await runCommand.run(args).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(InvalidOptionError);
  return err as InvalidOptionError;
}

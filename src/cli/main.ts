#!/usr/bin/env node
/**
 * moetier command-line front end: dispatches to src/cli/commands/*.
 * Operating errors (MoetierError) print their message, bugs a stack; the exit code says which
 * kind of failure it was (exit-code.ts).
 */
import { MoetierError } from '../core/errors.js';
import type { Command } from './command.js';
import { commands } from './commands/index.js';
import { EXIT_OK, EXIT_USAGE, exitCodeFor } from './exit-code.js';
import { packageVersion } from './version.js';

function help(all: Command[]): string {
  const lines = ['usage: moetier <command> [options]', '       moetier --version', '', 'commands:'];
  for (const c of all) lines.push(`  ${c.name.padEnd(12)} ${c.summary}`);
  lines.push('', 'moetier <command> --help shows the options of one command.');
  return lines.join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === '--help' || name === '-h') {
    console.log(help(commands));
    return EXIT_OK;
  }
  if (name === '--version' || name === '-V') {
    console.log(packageVersion());
    return EXIT_OK;
  }
  if (!name) {
    console.error(help(commands));
    return EXIT_USAGE;
  }
  const command = commands.find((c) => c.name === name);
  if (!command) {
    console.error(`moetier: unknown command ${JSON.stringify(name)}\n\n${help(commands)}`);
    return EXIT_USAGE;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(command.usage);
    return EXIT_OK;
  }
  return command.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // Operating errors get one line; a bug (anything else) keeps its stack so it can be reported.
    if (err instanceof MoetierError) console.error(`moetier: ${err.message}`);
    else if (isSystemError(err)) console.error(`moetier: ${err.message}`);
    else console.error(err);
    process.exitCode = exitCodeFor(err);
  },
);

/** A refusal of the operating system (ENOENT, EACCES, ENOSPC...): the user's to fix, not a bug. */
function isSystemError(err: unknown): err is NodeJS.ErrnoException {
  return (
    err instanceof Error &&
    typeof (err as NodeJS.ErrnoException).code === 'string' &&
    /^E[A-Z0-9]+$/.test((err as NodeJS.ErrnoException).code!) &&
    typeof (err as NodeJS.ErrnoException).syscall === 'string'
  );
}

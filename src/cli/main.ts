#!/usr/bin/env node
/**
 * moetier command-line front end: dispatches to src/cli/commands/*.
 * Operating errors (MoetierError) print their message and exit 1; bugs print a stack.
 */
import { MoetierError } from '../core/errors.js';
import type { Command } from './command.js';
import { commands } from './commands/index.js';

function help(all: Command[]): string {
  const lines = ['usage: moetier <command> [options]', '', 'commands:'];
  for (const c of all) lines.push(`  ${c.name.padEnd(12)} ${c.summary}`);
  lines.push('', 'moetier <command> --help shows the options of one command.');
  return lines.join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h') {
    console.log(help(commands));
    return name ? 0 : 1;
  }
  const command = commands.find((c) => c.name === name);
  if (!command) {
    console.error(`moetier: unknown command ${JSON.stringify(name)}\n\n${help(commands)}`);
    return 1;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(command.usage);
    return 0;
  }
  return command.run(rest);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    if (err instanceof MoetierError) console.error(`moetier: ${err.message}`);
    else console.error(err);
    process.exitCode = 1;
  },
);

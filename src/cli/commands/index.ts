import type { Command } from '../command.js';

/** Every sub-command, in the order `moetier --help` lists them. */
export const commands: Command[] = [];

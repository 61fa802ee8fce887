import type { Command } from '../command.js';
import { genModelCommand } from './gen-model.js';

/** Every sub-command, in the order `moetier --help` lists them. */
export const commands: Command[] = [genModelCommand];

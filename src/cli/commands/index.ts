import type { Command } from '../command.js';
import { demoCommand } from './demo.js';
import { genModelCommand } from './gen-model.js';
import { inspectCommand } from './inspect.js';
import { replayCommand } from './replay.js';
import { routesCommand } from './routes.js';
import { runCommand } from './run.js';
import { serveCommand } from './serve.js';

/** Every sub-command, in the order `moetier --help` lists them. */
export const commands: Command[] = [
  runCommand,
  serveCommand,
  demoCommand,
  genModelCommand,
  inspectCommand,
  replayCommand,
  routesCommand,
];

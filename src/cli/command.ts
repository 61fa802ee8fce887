/** One CLI sub-command: a file in src/cli/commands/ registered in main.ts. */
export interface Command {
  name: string;
  summary: string;
  usage: string;
  /** Returns the process exit code; never calls process.exit itself. */
  run(argv: string[]): Promise<number>;
}

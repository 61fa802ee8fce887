/** Shared by `run` and `demo`: stream one completion, then print its statistics. */
import type { Engine, GenerateOptions } from '../engine/engine.js';

export interface CompletionReport {
  model: string;
  prompt: string;
  tokens: number[];
  text: string;
  promptTokens: number;
  generatedTokens: number;
  finishReason: string;
  ttftMs: number;
  prefillTokPerS: number;
  decodeTokPerS: number;
}

export async function streamCompletion(
  engine: Engine,
  prompt: string,
  options: GenerateOptions,
  out: { write(text: string): void } | undefined,
): Promise<CompletionReport> {
  const tokens: number[] = [];
  let text = '';
  for await (const token of engine.generate(prompt, options)) {
    tokens.push(token.id);
    text += token.text;
    out?.write(token.text);
  }
  const stats = engine.lastStats!;
  return {
    model: engine.modelPath,
    prompt,
    tokens,
    text,
    promptTokens: stats.promptTokens,
    generatedTokens: stats.generatedTokens,
    finishReason: stats.finishReason,
    ttftMs: round(stats.ttftMs),
    prefillTokPerS: round(stats.prefillTokPerS),
    decodeTokPerS: round(stats.decodeTokPerS),
  };
}

/** Where text goes: process.stdout / process.stderr, or a collector in tests. */
export interface Stream {
  write(text: string): unknown;
  isTTY?: boolean;
}

/**
 * Statistics go to stderr, so that `moetier run ... > out.txt` keeps only the generated text.
 * On a terminal the text's last line is ended and a blank line set before the figures.
 */
export function printStats(stats: string, out: Stream = process.stdout, err: Stream = process.stderr): void {
  if (out.isTTY) out.write('\n');
  err.write(`${err.isTTY ? '\n' : ''}${stats}\n`);
}

export function formatStats(r: CompletionReport): string {
  return [
    `prompt ${r.promptTokens} tokens, generated ${r.generatedTokens} (${r.finishReason})`,
    `TTFT ${r.ttftMs.toFixed(1)} ms | prefill ${r.prefillTokPerS.toFixed(1)} tok/s | decode ${r.decodeTokPerS.toFixed(1)} tok/s`,
  ].join('\n');
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

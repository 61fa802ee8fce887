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

export function formatStats(r: CompletionReport): string {
  return [
    `prompt ${r.promptTokens} tokens, generated ${r.generatedTokens} (${r.finishReason})`,
    `TTFT ${r.ttftMs.toFixed(1)} ms | prefill ${r.prefillTokPerS.toFixed(1)} tok/s | decode ${r.decodeTokPerS.toFixed(1)} tok/s`,
  ].join('\n');
}

function round(x: number): number {
  return Math.round(x * 100) / 100;
}

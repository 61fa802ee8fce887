/**
 * One completion over the engine, for both routes: the request's tokens through the stop matcher
 * (stop strings across token boundaries), text out as it may be sent. The caller's signal (a
 * client that disconnected) cancels the request at once, queued or running. The first token is
 * awaited before anything is sent, so a full queue or a prompt past the context is still an error
 * response, not a broken stream.
 */
import type { Engine } from '../engine/engine.js';
import type { GenerationStats } from '../engine/stats.js';
import type { CompletionRequest } from './openai-request.js';
import { StopMatcher } from './stop-matcher.js';

export interface CompletionEnd {
  finishReason: 'stop' | 'length';
  promptTokens: number;
  completionTokens: number;
  stats: GenerationStats | undefined;
}

export interface Completion {
  /** Text pieces as they may be sent; the return value ends the completion. */
  deltas: AsyncGenerator<string, CompletionEnd>;
}

/** Starts the request and waits for its first token (errors before it are thrown here). */
export async function startCompletion(
  engine: Engine,
  req: CompletionRequest,
  signal: AbortSignal,
  /** Hears each generated token (the server's live counters). */
  onToken: () => void = () => undefined,
): Promise<Completion> {
  const prompt = req.messages ? engine.chatPrompt(req.messages) : req.prompt;
  // The request's own stats: with requests running together, engine.lastStats may be another's.
  let ended: GenerationStats | undefined;
  const onStats = (stats: GenerationStats): void => void (ended = stats);
  const tokens = engine.generate(prompt, { ...req.options, signal, onStats })[Symbol.asyncIterator]();
  const first = await tokens.next();
  const matcher = new StopMatcher(req.stop);
  async function* deltas(): AsyncGenerator<string, CompletionEnd> {
    let generated = 0;
    let step = first;
    try {
      while (!step.done) {
        generated++;
        onToken();
        const out = matcher.push(step.value.text);
        if (out) yield out;
        if (matcher.stopped) break;
        step = await tokens.next();
      }
    } finally {
      if (!step.done) await tokens.return?.(undefined); // a stop string, or the consumer left: the request ends here
    }
    const rest = matcher.flush();
    if (rest) yield rest;
    const stats = ended;
    const byEngine = stats?.finishReason === 'stop' || stats?.finishReason === 'context' ? 'stop' : 'length';
    return {
      finishReason: matcher.stopped ? 'stop' : byEngine,
      promptTokens: stats?.promptTokens ?? 0,
      completionTokens: generated,
      stats,
    };
  }
  return { deltas: deltas() };
}

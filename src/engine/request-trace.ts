/**
 * One request's spans and metrics, with or without an expert tier (@opentelemetry/api only:
 * no-ops until an SDK is registered, and then nothing is stamped either):
 *
 *   moetier.request        live: from the queue's grant to the end of the request (gen_ai.* attributes)
 *   ├── moetier.prefill    [before the prefill's evaluation, after it]
 *   └── moetier.decode_step [before a generated token's evaluation, after it]: one per token after the first
 *       (the tier hangs its moetier.layer.compute spans under the prefill and the decode steps: stepContext)
 *
 * Per token this only reads the monotonic clock twice into a preallocated buffer; the decode-step
 * spans are built every `decodeStepSpansBatch` steps (and at the end) from those stamps, for the
 * reason the tier batches its own work (src/engine/tier/request.ts): code that runs once per token
 * finds its code and data evicted by the eval. A step the tier asks a parent for before its end is
 * stamped (its own report arrives inside its evaluation) is started live and ended with its stamp.
 *
 * No prompt or generated text goes into an attribute unless content capture is on
 * (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true, as OpenTelemetry's GenAI
 * instrumentations read it).
 */
import path from 'node:path';
import { context, SpanKind, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import {
  AttrNames,
  captureContentVariable,
  clockBridge,
  endSpan,
  GenAiMetrics,
  GenAiNames,
  genAiOperation,
  moetierTracer,
  recordTimedSpan,
  SpanNames,
  startSpan,
} from '../telemetry/index.js';
import type { GenerationStats } from './stats.js';

/** Decode steps whose spans are built together. */
export const decodeStepSpansBatch = 8;

export interface RequestTraceInfo {
  /** gen_ai.request.model. */
  model: string;
  /** The tier's backend (moetier.backend); undefined without a tier. */
  backend: string | undefined;
  promptTokens: number;
  maxTokens: number;
  sampling: { temperature?: number; topK?: number; topP?: number; seed?: number };
  /** The prompt as the caller gave it, for gen_ai.input.messages when content capture is on. */
  prompt: string | number[];
}

/** One stamped step waiting for its span. */
interface Step {
  position: number;
  startNs: bigint;
  /** 0n while the step runs. */
  endNs: bigint;
  /** Started live because the tier asked for its context before its end. */
  live?: Span;
  context?: Context;
}

const metrics = new GenAiMetrics();

/** The model's name for gen_ai.request.model: GGUF general.name, else the file's base name. */
export function modelName(file: string, generalName: unknown): string {
  return typeof generalName === 'string' && generalName.trim() !== '' ? generalName : path.basename(file);
}

/** Content capture: off unless the standard variable says true. */
export function capturesContent(env: Readonly<Record<string, string | undefined>> = process.env): boolean {
  return env[captureContentVariable]?.trim().toLowerCase() === 'true';
}

export class RequestTrace {
  /** The request span's context: the parent of the tier's uploads, rebuilds and calibration. */
  readonly context: Context;
  readonly recording: boolean;
  private readonly span: Span;
  private readonly tracer: Tracer;
  private readonly metricAttributes: Attributes;
  private readonly captureContent: boolean;
  private prefill: Step | undefined;
  /** Decode steps not yet built, in order; the last one may still run. */
  private steps: Step[] = [];
  private text = '';

  constructor(
    private readonly info: RequestTraceInfo,
    tracer: Tracer = moetierTracer(),
  ) {
    this.tracer = tracer;
    this.metricAttributes = {
      [GenAiNames.operationName]: genAiOperation,
      [GenAiNames.requestModel]: info.model,
      ...(info.backend ? { [AttrNames.backend]: info.backend } : {}),
    };
    this.span = startSpan(tracer, SpanNames.request, this.requestAttributes());
    this.context = trace.setSpan(context.active(), this.span);
    this.recording = this.span.isRecording();
    this.captureContent = this.recording && capturesContent();
  }

  private requestAttributes(): Attributes {
    const { info } = this;
    const a: Attributes = {
      ...this.metricAttributes,
      [GenAiNames.requestMaxTokens]: info.maxTokens,
      [GenAiNames.usageInputTokens]: info.promptTokens,
    };
    if (info.sampling.temperature !== undefined) a[GenAiNames.requestTemperature] = info.sampling.temperature;
    if (info.sampling.topK) a[GenAiNames.requestTopK] = info.sampling.topK;
    if (info.sampling.topP !== undefined && info.sampling.topP < 1) a[GenAiNames.requestTopP] = info.sampling.topP;
    if (info.sampling.seed !== undefined) a[GenAiNames.requestSeed] = info.sampling.seed;
    return a;
  }

  beginPrefill(): void {
    if (this.recording) this.prefill = { position: 0, startNs: process.hrtime.bigint(), endNs: 0n };
  }

  endPrefill(): void {
    const p = this.prefill;
    if (!p) return;
    p.endNs = process.hrtime.bigint();
    this.build(SpanNames.prefill, p);
  }

  /** Before the evaluation of the token at `position`. */
  beginStep(position: number): void {
    if (this.recording) this.steps.push({ position, startNs: process.hrtime.bigint(), endNs: 0n });
  }

  endStep(): void {
    if (!this.recording) return;
    const step = this.steps[this.steps.length - 1];
    step.endNs = process.hrtime.bigint();
    if (step.live) this.build(SpanNames.decodeStep, step);
    if (this.steps.length >= decodeStepSpansBatch) this.flush();
  }

  /** The text of a generated token (kept for gen_ai.output.messages only when content capture is on). */
  addText(text: string): void {
    if (this.captureContent) this.text += text;
  }

  /**
   * The parent of the tier's spans of the step at `position` (0: the prefill): that step's span,
   * built now if it ended, started live if it runs; the request's context for anything else.
   */
  stepContext(position: number): Context {
    if (!this.recording) return this.context;
    if (position === 0 && this.prefill) return this.contextOf(SpanNames.prefill, this.prefill);
    const step = this.steps.find((s) => s.position === position);
    return step ? this.contextOf(SpanNames.decodeStep, step) : this.context;
  }

  private contextOf(name: string, step: Step): Context {
    if (step.context) return step.context;
    if (step.endNs !== 0n) return this.build(name, step);
    step.live = this.tracer.startSpan(
      name,
      {
        kind: SpanKind.INTERNAL,
        startTime: clockBridge().toHrTime(step.startNs),
        attributes: stepAttributes(name, step),
      },
      this.context,
    );
    step.context = trace.setSpan(this.context, step.live);
    return step.context;
  }

  /** The span of an ended step (a live one is ended at its stamp); returns its context. */
  private build(name: string, step: Step): Context {
    if (step.live) {
      step.live.end(clockBridge().toHrTime(step.endNs));
      step.live = undefined;
      return step.context!;
    }
    if (step.context) return step.context;
    const spanContext = recordTimedSpan(
      this.tracer,
      name,
      step.startNs,
      step.endNs,
      stepAttributes(name, step),
      this.context,
    );
    step.context = trace.setSpanContext(this.context, spanContext);
    return step.context;
  }

  /** Builds the spans of the decode steps that ended (nobody asks for their context now); a running one stays. */
  private flush(): void {
    const running = this.steps.filter((s) => s.endNs === 0n);
    for (const s of this.steps) {
      if (s.endNs !== 0n && !s.context)
        recordTimedSpan(
          this.tracer,
          SpanNames.decodeStep,
          s.startNs,
          s.endNs,
          stepAttributes(SpanNames.decodeStep, s),
          this.context,
        );
    }
    this.steps = running;
  }

  /** Ends the request (also an aborted or failed one): the last spans, the request span, the metrics of a request without an error. */
  end(stats: GenerationStats, error?: unknown): void {
    if (this.recording) {
      for (const s of this.steps) if (s.endNs === 0n) s.endNs = process.hrtime.bigint(); // a step its evaluation's throw left open
      if (this.prefill && this.prefill.endNs === 0n) this.endPrefill();
      this.flush();
      this.span.setAttributes({
        [GenAiNames.usageOutputTokens]: stats.generatedTokens,
        [GenAiNames.responseFinishReasons]: [stats.finishReason],
      });
      if (error !== undefined)
        this.span.setAttribute(GenAiNames.errorType, error instanceof Error ? error.name : typeof error);
      if (this.captureContent)
        this.span.setAttributes(contentAttributes(this.info.prompt, this.text, stats.finishReason));
    }
    endSpan(this.span, error);
    if (error === undefined)
      metrics.record(
        {
          ttftMs: stats.ttftMs,
          msPerToken: stats.msPerToken,
          promptTokens: stats.promptTokens,
          generatedTokens: stats.generatedTokens,
        },
        this.metricAttributes,
      );
  }
}

function stepAttributes(name: string, step: Step): Attributes {
  return name === SpanNames.decodeStep ? { [AttrNames.tokenIndex]: step.position } : {};
}

/** The prompt and the completion in the conventions' message shapes (JSON strings). */
function contentAttributes(prompt: string | number[], text: string, finishReason: string): Attributes {
  const part = (content: string) => [{ type: 'text', content }];
  const input = typeof prompt === 'string' ? prompt : JSON.stringify(prompt);
  return {
    [GenAiNames.inputMessages]: JSON.stringify([{ role: 'user', parts: part(input) }]),
    [GenAiNames.outputMessages]: JSON.stringify([
      { role: 'assistant', parts: part(text), finish_reason: finishReason },
    ]),
  };
}

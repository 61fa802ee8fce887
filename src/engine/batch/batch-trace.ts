/**
 * The span of a batching engine's busy period (SpanNames.batch): from its first step until no request
 * is left. The tier's request spans the same period (src/engine/batch/batched-requests.ts), so its
 * step and layer spans hang under this one rather than under one of the requests sharing the steps.
 * A root span: the busy period belongs to no single request.
 */
import { ROOT_CONTEXT, trace, type Context, type Span } from '@opentelemetry/api';
import { endSpan, GenAiNames, moetierTracer, SpanNames, startSpan } from '../../telemetry/index.js';
import type { TraceParent } from '../tier/tracing.js';

export class BatchTrace implements TraceParent {
  readonly context: Context;
  readonly recording: boolean;
  private readonly span: Span;

  constructor(model: string) {
    this.span = startSpan(moetierTracer(), SpanNames.batch, { [GenAiNames.requestModel]: model }, ROOT_CONTEXT);
    this.context = trace.setSpan(ROOT_CONTEXT, this.span);
    this.recording = this.span.isRecording();
  }

  /** Every step's spans hang under the busy period's span. */
  stepContext(): Context {
    return this.context;
  }

  /** requests: how many the period served. */
  end(requests: number, error?: unknown): void {
    this.span.setAttribute('moetier.batch.requests', requests);
    endSpan(this.span, error);
  }
}

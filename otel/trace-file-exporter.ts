/**
 * A SpanExporter that keeps the spans it is given and writes them, on shutdown, as one
 * Chrome / Perfetto trace-event JSON file (see trace-events.ts for the format). Meant for
 * `moetier run --trace-file F`: the overlap timeline without a collector.
 *
 * Held in memory until shutdown, so it is bounded: past `spansMax` spans are dropped and
 * counted (the count is written in the file's otherData.droppedSpans).
 */
import { open, rename, rm } from 'node:fs/promises';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { MoetierError } from '../src/core/errors.js';
import { checkOutputPath, tempPathBeside } from '../src/core/output-file.js';
import type { TraceFileReport } from './telemetry.js';
import { toTraceEventFile, type SpanRecord } from './trace-events.js';

/** Default bound on the spans one trace file holds (~300 bytes each in memory). */
export const traceFileSpansMaxDefault = 500_000;
/** Events per write call: keeps the JSON text of a long run out of one giant string. */
const eventsPerWrite = 4096;

/** The trace file could not be written. */
export class TraceFileError extends MoetierError {
  readonly file: string;
  constructor(file: string, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : String(cause);
    super('E_TRACE_FILE', `${file}: could not write the trace file: ${reason}`, { cause });
    this.file = file;
  }
}

export type { TraceFileReport } from './telemetry.js';

export class TraceFileExporter implements SpanExporter {
  private readonly records: SpanRecord[] = [];
  private dropped = 0;
  private written: Promise<TraceFileReport> | undefined;

  constructor(
    readonly file: string,
    private readonly processName = 'moetier',
    private readonly spansMax = traceFileSpansMaxDefault,
  ) {}

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    if (this.written) {
      resultCallback({ code: ExportResultCode.FAILED, error: new Error(`${this.file}: trace file already written`) });
      return;
    }
    for (const span of spans) {
      if (this.records.length >= this.spansMax) this.dropped++;
      else this.records.push(toRecord(span));
    }
    resultCallback({ code: ExportResultCode.SUCCESS });
  }

  /** Spans are written once, at shutdown. */
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  async shutdown(): Promise<void> {
    await this.write();
  }

  /** Writes the file (once; later calls return the same report). Rejects with TraceFileError. */
  write(): Promise<TraceFileReport> {
    this.written ??= this.writeFile();
    return this.written;
  }

  private async writeFile(): Promise<TraceFileReport> {
    const { traceEvents, ...rest } = toTraceEventFile(this.records, this.processName, this.dropped);
    // Whole or not at all, and never over something that is not a regular file (core/output-file.ts).
    const tmp = tempPathBeside(this.file);
    try {
      checkOutputPath(this.file, '--trace-file');
      const handle = await open(tmp, 'wx');
      try {
        await handle.write('{"traceEvents":[\n');
        for (let i = 0; i < traceEvents.length; i += eventsPerWrite) {
          const chunk = traceEvents.slice(i, i + eventsPerWrite).map((e) => JSON.stringify(e));
          await handle.write((i > 0 ? ',\n' : '') + chunk.join(',\n'));
        }
        const tail = JSON.stringify(rest).slice(1); // '"displayTimeUnit":...}'
        await handle.write(`\n],${tail}\n`);
      } finally {
        await handle.close();
      }
      await rename(tmp, this.file);
    } catch (error) {
      await rm(tmp, { force: true });
      throw new TraceFileError(this.file, error);
    }
    return { file: this.file, spans: this.records.length, droppedSpans: this.dropped };
  }
}

function toRecord(span: ReadableSpan): SpanRecord {
  const parentSpanId = span.parentSpanContext?.spanId;
  return {
    name: span.name,
    startEpochNs: hrTimeToNs(span.startTime),
    endEpochNs: hrTimeToNs(span.endTime),
    traceId: span.spanContext().traceId,
    spanId: span.spanContext().spanId,
    ...(parentSpanId ? { parentSpanId } : {}),
    attributes: { ...span.attributes },
  };
}

function hrTimeToNs(time: readonly [number, number]): bigint {
  return BigInt(time[0]) * 1_000_000_000n + BigInt(time[1]);
}

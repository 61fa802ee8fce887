/**
 * Prefetch over real OTLP/HTTP (issue 13 item 4): the request's route outcomes are metrics
 * (moetier.prefetch.io by outcome, the coverage per request) equal to the engine's own report, and
 * each prefetch is a moetier.expert_read span of mode prefetch, told apart from demand reads.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttrNames, MetricSpecs, SpanNames } from '../../otel/semconv.js';
import { startTelemetry } from '../../otel/setup.js';
import { startOtlpReceiver, type OtlpReceiver } from '../otel/otlp-receiver.js';
import { useOtelEnv } from '../otel/env.js';
import { tempDir, tinyModel } from './tier-helpers.js';
import { promptText, runPrefetch } from './prefetch-helpers.js';

const { dir, cleanup } = tempDir('moetier-prefetch-otlp-');
let receiver: OtlpReceiver;
let restoreEnv: () => void;
let model: string;
beforeAll(async () => {
  model = await tinyModel(dir, 'q8_0', 29);
  receiver = await startOtlpReceiver();
  restoreEnv = useOtelEnv({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_SERVICE_NAME: 'moetier-prefetch-test',
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'http/json',
  });
});
afterAll(async () => {
  restoreEnv();
  await receiver.close();
  cleanup();
});

describe('prefetch telemetry', () => {
  it('exports the route outcomes as metrics equal to the report, and prefetch reads as their own spans', async () => {
    const telemetry = startTelemetry();
    let report;
    try {
      const engine = await runPrefetch(model, promptText, { backend: 'fake', prefetch: { mode: 'enforce' } });
      report = engine.report;
    } finally {
      await telemetry.shutdown();
    }
    const io = receiver.metrics.find((m) => m.name === MetricSpecs.prefetchIo.name)!;
    expect(io.unit).toBe('By');
    const byOutcome = Object.fromEntries(io.points.map((p) => [p.attributes[AttrNames.prefetchOutcome], p.sum]));
    expect(report.coveredBytes + report.lateBytes).toBeGreaterThan(0);
    expect(byOutcome.covered ?? 0).toBe(report.coveredBytes);
    expect(byOutcome.uncovered).toBe(report.uncoveredBytes);
    expect(byOutcome.late ?? 0).toBe(report.lateBytes);
    expect(byOutcome.wasted ?? 0).toBe(report.wastedBytes);
    const coverage = receiver.metrics.find((m) => m.name === MetricSpecs.prefetchCoverage.name)!;
    expect(coverage.points[0]).toMatchObject({ count: 1, sum: report.coverage });
    const spans = await receiver.waitForSpans((s) => s.some((x) => x.name === SpanNames.request));
    const prefetchReads = spans.filter(
      (s) => s.name === SpanNames.expertRead && s.attributes[AttrNames.readMode] === 'prefetch',
    );
    expect(prefetchReads.length).toBeGreaterThan(0);
    expect(prefetchReads.length).toBeLessThanOrEqual(report.issued); // the prefill's mark does not reset the ledger
  });
});

/**
 * The layer-compute actor: owns the native eval calls of the tier's requests. One message is
 * one step; the native eval runs every layer (attention, routing, experts from slots or host
 * copies) off the event loop, writing routes and per-layer timing into the actor's buffers;
 * then the step's report goes out on the step-report bus, where placement and tracing read it.
 *
 *   evaluate(step) ──evalAsync──> routes + layerStats (pair t mod 2) ──publish──> step-report bus
 *                                                                         ├──> placement (routes)
 *                                                                         └──> tracing, calibration (layerStats)
 *
 * Before a step writes a pair, `beforeReuse` is called with the report that pair holds, so a
 * subscriber still reading it (work deferred off the critical path) finishes first. Steps are
 * sequential (the engine's request queue); a second evaluate while one runs is a bug.
 */
import type { Observable } from 'rxjs';
import { assert } from '../../core/assert.js';
import type { NativeBinding, NativeContextHandle, NativeEvalOptions } from '../../native/binding.js';
import { StepReportBus } from '../../streams/step-reports.js';
import { layerStatsLength, nextBuffer, routesLength, type StepShape } from './logic.js';
import type { EvaluateStep, LayerStepReport } from './messages.js';

export class LayerComputeActor {
  /** One report of ring: the buffers are reused two steps on, so an older one would read rewritten data. */
  private readonly bus = new StepReportBus<LayerStepReport>(1);
  private readonly routes = [new Int32Array(0), new Int32Array(0)];
  private readonly stats: [Float64Array, Float64Array];
  private readonly reports: Array<LayerStepReport | undefined> = [undefined, undefined];
  private lastBuffer: number | undefined;
  private running = false;

  constructor(
    private readonly native: Pick<NativeBinding, 'evalAsync'>,
    private readonly context: NativeContextHandle,
    private readonly shape: StepShape,
  ) {
    this.stats = [new Float64Array(layerStatsLength(shape)), new Float64Array(layerStatsLength(shape))];
  }

  /** Every step's report from now on, in step order, on the event loop right after the step's eval. */
  reports$(): Observable<LayerStepReport> {
    return this.bus.live$();
  }

  /** The last step's report (its buffers stay valid until the step after next). */
  get last(): LayerStepReport | undefined {
    return this.lastBuffer === undefined ? undefined : this.reports[this.lastBuffer];
  }

  /**
   * Runs one step and publishes its report (subscribers run before this resolves).
   * beforeReuse: called with the report whose buffers the step is about to overwrite.
   */
  async evaluate(step: EvaluateStep, beforeReuse?: (old: LayerStepReport) => void): Promise<LayerStepReport> {
    assert(!this.running, 'one layer-compute step at a time');
    const buffer = nextBuffer(this.lastBuffer);
    const old = this.reports[buffer];
    if (old && beforeReuse) beforeReuse(old);
    const need = routesLength(this.shape, step.tokens.length);
    if (this.routes[buffer].length !== need) this.routes[buffer] = new Int32Array(need);
    const options: NativeEvalOptions = { routes: this.routes[buffer], layerStats: this.stats[buffer] };
    if (step.onLayerRouted) options.onLayerRouted = step.onLayerRouted;
    this.running = true;
    try {
      await this.native.evalAsync(this.context, step.tokens, step.position, step.logits, options);
    } finally {
      this.running = false;
    }
    const report: LayerStepReport = { phase: step.phase, position: step.position, nTokens: step.tokens.length, routes: this.routes[buffer], layerStats: this.stats[buffer], buffer };
    this.reports[buffer] = report;
    this.lastBuffer = buffer;
    this.bus.publish(report);
    return report;
  }

  close(): void {
    this.bus.end();
  }
}

/**
 * The layer-compute actor: owns the native eval calls of the tier's requests. One message is
 * one step; the native eval runs every layer (attention, routing, experts from slots or host
 * copies) off the event loop, writing routes and per-layer timing into the actor's buffers;
 * the step's report is what evaluate returns: the tier request's step (src/engine/tier/request.ts
 * runStep) hands it on to placement, rebuild, tracing and calibration, never back up.
 *
 *   evaluate(step) ──evalAsync──> routes + layerStats (ring slot t mod 16) ──> report (the step's next stage)
 *
 * The ring is shared memory between the eval and the pipeline: the eval writes a decode step's
 * routes and timing into its slot (views made once, no copy), and the report stays readable for
 * stepRingSlots - 1 more steps, so observers off the placement's path can read several steps at
 * once. Steps are sequential (the engine's request queue); a second evaluate while one runs is a bug.
 */
import { assert } from '../../core/assert.js';
import type { NativeBinding, NativeContextHandle, NativeEvalOptions } from '../../native/binding.js';
import { layerStatsLength, nextRingSlot, routesLength, stepRingSlots, type StepShape } from './logic.js';
import type { EvaluateStep, LayerStepReport } from './messages.js';

export class LayerComputeActor {
  /** Per decode ring slot: the eval's options, views into one routes and one stats array. */
  private readonly ring: NativeEvalOptions[];
  private prefill: { routes: Int32Array; layerStats: Float64Array };
  private lastSlot: number | undefined;
  private lastReport: LayerStepReport | undefined;
  private running = false;
  private closed = false;

  constructor(
    private readonly native: Pick<NativeBinding, 'evalAsync'>,
    private readonly context: NativeContextHandle,
    private readonly shape: StepShape,
  ) {
    const r = routesLength(shape, 1);
    const s = layerStatsLength(shape);
    const routes = new Int32Array(stepRingSlots * r);
    const stats = new Float64Array(stepRingSlots * s);
    this.ring = Array.from({ length: stepRingSlots }, (_, i) => ({
      routes: routes.subarray(i * r, (i + 1) * r),
      layerStats: stats.subarray(i * s, (i + 1) * s),
    }));
    this.prefill = { routes: new Int32Array(0), layerStats: new Float64Array(s) };
  }

  /** The last step's report (see LayerStepReport for how long its buffers stay valid). */
  get last(): LayerStepReport | undefined {
    return this.lastReport;
  }

  /** Runs one step; its report (see LayerStepReport for how long its buffers stay valid). */
  async evaluate(step: EvaluateStep): Promise<LayerStepReport> {
    assert(!this.running, 'one layer-compute step at a time');
    assert(!this.closed, 'no step after close');
    const decode = step.tokens.length === 1 && step.phase === 'decode';
    const slot = decode ? nextRingSlot(this.lastSlot) : -1;
    const batched = !decode && step.phase === 'decode';
    const options = decode ? this.ring[slot] : batched ? this.batchedOptions(step) : this.prefillOptions(step);
    options.forcedRoutes = step.forcedRoutes; // the ring's options keep no trace rows of an earlier step
    this.running = true;
    try {
      await this.native.evalAsync(this.context, step.tokens, step.position, step.logits, options);
    } finally {
      this.running = false;
    }
    if (decode) this.lastSlot = slot;
    const report: LayerStepReport = {
      phase: step.phase,
      position: step.position,
      nTokens: step.tokens.length,
      firstToken: step.tokens[0],
      ...(batched ? { tokens: step.tokens.slice() } : {}),
      routes: options.routes!,
      layerStats: options.layerStats!,
      slot,
    };
    this.lastReport = report;
    return report;
  }

  /** A prefill (or any multi-token step): its own buffers, grown to the step; the replan hook if asked. */
  private prefillOptions(step: EvaluateStep): NativeEvalOptions {
    const need = routesLength(this.shape, step.tokens.length);
    if (this.prefill.routes.length !== need) this.prefill = { ...this.prefill, routes: new Int32Array(need) };
    const options: NativeEvalOptions = { routes: this.prefill.routes, layerStats: this.prefill.layerStats };
    if (step.onLayerRouted) options.onLayerRouted = step.onLayerRouted;
    return options;
  }

  /**
   * A batched decode step (several sequences' rows, src/engine/batch): buffers of its own, so its report
   * stays readable while the tier request's observers wait for a batch of steps, as a ring slot's does.
   */
  private batchedOptions(step: EvaluateStep): NativeEvalOptions {
    const options: NativeEvalOptions = {
      routes: new Int32Array(routesLength(this.shape, step.tokens.length)),
      layerStats: new Float64Array(layerStatsLength(this.shape)),
    };
    if (step.batch) Object.assign(options, step.batch);
    return options;
  }

  close(): void {
    this.closed = true;
  }
}

/**
 * How the tier's actors are wired (one edge per file; each says its concurrency and buffer):
 *
 *   engine.generate ──tokens.ts──> engine.generate$()          (pull, buffer 0; unsubscribe = abort)
 *
 *   layer-compute actor (src/actors/layer-compute: the native eval of one step, every layer;
 *        │                routes + layerStats in its ring of 16 decode steps, written by the eval)
 *        │ step-reports.ts (in step order, live only: a ring slot is reused 16 steps on)
 *        ├──> placement: LFRU tick ──> upload-queue logic ──> tierRequestSwap     (src/engine/tier, every step)
 *        └──> route log, tracing: layer / upload spans          (src/engine/tier, every 8 steps, from the ring)
 *               │ step-reports.ts again: each step's timing (copied; ring of 4, oldest dropped and counted)
 *               └──> calibration actor (src/actors/calibration/actor.ts): calibration.ts calibrationUpdates
 *                      ──scan──> snapshots (EWMA bandwidth, fixed cost, compute/layer) ──> engine.calibration$()
 *                      + a span per update, parented by the request's context carried in the report
 *
 *   tierPoll ──evicted──> int8-rebuild (bounded worker pool) ──> host-copy arena offsets
 *
 * The per-layer critical path stays native: streams see one report per step, never per layer.
 */
export { calibrationSnapshots, calibrationUpdates, type CalibrationUpdate } from './calibration.js';
export { StepReportBus } from './step-reports.js';
export { fromCancellable } from './tokens.js';

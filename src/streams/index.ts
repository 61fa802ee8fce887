/**
 * How the tier's actors are wired (one edge per file; each says its concurrency and buffer):
 *
 *   engine.generate ──tokens.ts──> engine.generate$()          (pull, buffer 0; unsubscribe = abort)
 *
 *   layer-compute (native eval of one step: every layer, routes + layerStats in shared buffers)
 *        │ step-reports.ts (in step order; ring of N, oldest dropped and counted)
 *        ├──> placement: LFRU tick ──> upload-queue logic ──> tierRequestSwap     (src/engine/tier)
 *        ├──> tracing: layer / upload spans; publishes the step's timing on the bus (src/engine/tier)
 *        └──> calibration actor (src/actors/calibration/actor.ts): calibration.ts calibrationUpdates
 *               ──scan──> snapshots (EWMA bandwidth, fixed cost, compute/layer) ──> engine.calibration$()
 *               + a span per update, parented by the request's context carried in the report
 *
 *   tierPoll ──evicted──> int8-rebuild (bounded worker pool) ──> host-copy arena offsets
 *
 * The per-layer critical path stays native: streams see one report per step, never per layer.
 */
export { calibrationSnapshots, calibrationUpdates, type CalibrationUpdate } from './calibration.js';
export { StepReportBus } from './step-reports.js';
export { fromCancellable } from './tokens.js';

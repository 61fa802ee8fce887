/**
 * How the tier's actors are wired (one edge per file; each says its concurrency and buffer):
 *
 *   engine.generate ──tokens.ts──> engine.generate$()          (pull, buffer 0; unsubscribe = abort)
 *
 *   one step of a tier request ──step-pipeline.ts──> (every edge points down; an error ends the step)
 *     evaluate   layer-compute actor: the native eval of every layer (routes + layerStats in its ring)
 *     settle     tierPoll: settled uploads retire in the upload queue
 *     rebuild    int8-rebuild actor (bounded worker pool): host copies of the evicted
 *     observe    placement: the routes into the policy (its residency: the tier's snapshot)
 *     decide     the policy's tick: swaps
 *     issue      upload-queue logic (the one gate) ──> tierRequestSwap
 *     batch      every 8 decode steps: route log, layer / upload spans
 *     calibrate  calibration.ts calibrationUpdates ──scan──> calibration actor: snapshots
 *                (EWMA bandwidth, fixed cost, compute/layer) ──> engine.calibration$() + a span per update
 *
 * The per-layer critical path stays native: streams see one report per step, never per layer.
 */
export { calibrationSnapshots, calibrationUpdates, type CalibrationUpdate } from './calibration.js';
export { batchEdge, evaluateEdge, placementEdge, settleEdge, stepPipeline, type SettledStep, type StepStages } from './step-pipeline.js';
export { fromCancellable } from './tokens.js';

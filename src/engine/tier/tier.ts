/**
 * The expert tier in the engine: builds the backend and the tier (native, or the TypeScript
 * fallback), warmstarts it from the heat file, and runs the placement around each request.
 *
 *   open:     backend(budget = slots x slot bytes) -> tier -> warmstart (hottest per layer | ids)
 *   request:  prefill eval -> afterPrefill (stats mark) -> [decode eval -> afterDecode]* -> finish
 *   finish:   drop queued swaps, settle uploads, merge the request's routing into the heat file
 */
import type { UploadQueueLimits } from '../../actors/upload-queue/messages.js';
import type { NativeBinding, NativeContextHandle } from '../../native/binding.js';
import { Backend } from '../../native/backend.js';
import type { LfruParams } from '../../tiers/policies/lfru.js';
import { startResidency } from '../../tiers/start.js';
import { residentIds } from '../../tiers/residency.js';
import { addRoutes, emptyHeat, readHeatFile, writeHeatFile } from '../heat-file.js';
import type { LoadedModel } from '../load.js';
import { expertContainerBytes } from './experts.js';
import { hasNativeTier, NativeTierPort } from './native-port.js';
import type { TierConfig } from './options.js';
import { TierPlacement } from './placement.js';
import type { TierPort } from './port.js';
import { TierRequest } from './request.js';
import { TierTracing } from './tracing.js';
import { CALIBRATION_DEFAULTS } from '../../actors/calibration/logic.js';
import { ShadowTierPort } from './shadow-port.js';

const slotAlignBytes = 64; // native/backend/backend.h kSlotAlignBytes: the budget covers the slot stride

export class EngineTier {
  private constructor(
    readonly port: TierPort,
    readonly backend: Backend,
    readonly placement: TierPlacement,
    private readonly model: LoadedModel,
    readonly config: TierConfig,
    /** 'heat' when a heat file filled the slots, 'ids' on a cold start. */
    readonly start: 'heat' | 'ids',
    readonly tracing: TierTracing = new TierTracing({ alpha: CALIBRATION_DEFAULTS.alpha, nLayer: model.hparams.nLayer }, config.backend),
  ) {}

  static async create(native: NativeBinding, model: LoadedModel, context: NativeContextHandle, config: TierConfig): Promise<EngineTier> {
    const hp = model.hparams;
    const containerBytes = expertContainerBytes(model.file, hp);
    const totalSlots = config.slotsPerLayer.reduce((a, b) => a + b, 0);
    const budgetBytes = totalSlots * Math.ceil(containerBytes / slotAlignBytes) * slotAlignBytes;
    const backend = Backend.create(config.backend, config.backend === 'fake' ? { ...Backend.preset(config.fake.preset ?? 'consumer-8gb'), ...withoutPreset(config.fake), budgetBytes } : { budgetBytes });
    let port: TierPort | undefined;
    try {
      port = config.impl === 'native' && hasNativeTier(native)
        ? new NativeTierPort(native, native.createTier(context, backendHandle(backend), { slotsPerLayer: config.slotsPerLayer }), hp.nLayer, hp.nExpert, config.slotsPerLayer)
        : new ShadowTierPort(backend, model.file, hp, config.slotsPerLayer, containerBytes);
      const heat = config.heat === false ? undefined : readHeatFile(config.heat, hp);
      const start = heat ? 'heat' : 'ids';
      const residency = startResidency(start, hp.nLayer, hp.nExpert, { scope: 'layer', slots: config.slotsPerLayer[0] }, heat?.counts);
      for (let l = 0; l < hp.nLayer; l++) await port.warmstart(l, Int32Array.from(residentIds(residency, l)));
      port.resetStats();
      const placement = new TierPlacement(port, config.lfru, config.upload, heat?.counts);
      return new EngineTier(port, backend, placement, model, config, start);
    } catch (err) {
      port?.free();
      backend.destroy();
      throw err;
    }
  }

  /** Before a request: the fills the policy decided (slots freed by failed uploads), uploaded and awaited. */
  async beginRequest(promptTokens: number): Promise<TierRequest> {
    const fills = this.placement.takeFills();
    try {
      for (const f of fills) await this.port.warmstart(f.layer, Int32Array.of(f.expert));
    } catch {
      // A failed fill leaves its slot free (counted by the backend); the next tick decides again.
    } finally {
      if (fills.length > 0) this.placement.afterFills();
    }
    return new TierRequest(this.port, this.placement, this.model.hparams, this.tracing.beginRequest(promptTokens));
  }

  /** Merges a finished request's routing ([row][layer][k]) into the heat file. */
  mergeHeat(rows: number[][][]): void {
    if (this.config.heat === false || rows.length === 0) return;
    const hp = this.model.hparams;
    const current = readHeatFile(this.config.heat, hp) ?? emptyHeat(hp);
    writeHeatFile(this.config.heat, addRoutes(current, rows));
  }

  tune(params: LfruParams | undefined, limits: Partial<UploadQueueLimits> | undefined): void {
    this.placement.tune(params, limits);
    if (params) this.config.lfru = params;
  }

  close(): void {
    this.port.free();
    this.backend.destroy();
  }
}

function withoutPreset(o: TierConfig['fake']): Omit<TierConfig['fake'], 'preset'> {
  const { preset: _preset, ...rest } = o;
  return rest;
}

/** The backend's native handle, for createTier (the Backend wrapper keeps it private). */
function backendHandle(b: Backend): import('../../native/binding.js').NativeBackendHandle {
  return (b as unknown as { handle: import('../../native/binding.js').NativeBackendHandle }).handle;
}

/**
 * Napkin cost model: turns replay counts into estimated MoE time. Every call is
 * taken as memory-bound (its time is one read of the expert's weights plus a fixed
 * overhead, whatever its row count) and nothing overlaps: the estimate is serial.
 *
 *   transferUs = transferFixedUs + expertBytes / h2dGBps           (one upload)
 *   deviceUs   = deviceCallFixedUs + expertBytes / deviceMemGBps   (a resident call)
 *   hostUs     = hostCallFixedUs + hostExpertBytes / hostMemGBps   (a hosted miss)
 *   decode  ms/token = (hits*deviceUs + misses*missUs + extraUploads*transferUs) / tokens
 *     hosted:    missUs = hostUs,                  extraUploads = every upload
 *     host-less: missUs = transferUs + deviceUs,   extraUploads = uploads not serving a miss
 */
import { InvalidOptionError } from '../core/errors.js';
import { expertBytes, hostExpertBytes, type ModelGeometry } from './geometry.js';

export interface CostParams {
  /** Host-to-device bandwidth, GB/s: PCIe 4.0 x16 moves about 25 GB/s of its 32 GB/s peak. */
  h2dGBps: number;
  /** Fixed cost per transfer, us: about 330 us per expert fetch as MoE-Infinity measured. */
  transferFixedUs: number;
  /** Device memory bandwidth, GB/s: RTX 3070 spec (448 GB/s), the GPU of docs/SPEC.md's measurements. */
  deviceMemGBps: number;
  /** Fixed cost per resident expert call, us: about three kernel launches (assumed). */
  deviceCallFixedUs: number;
  /** Host bandwidth a matvec achieves, GB/s: ~40 % of dual-channel DDR4-3200 (51.2 GB/s peak), assumed. */
  hostMemGBps: number;
  /** Fixed cost per host expert call, us: thread-pool dispatch (assumed). */
  hostCallFixedUs: number;
}

export const costDefaults: CostParams = {
  h2dGBps: 25,
  transferFixedUs: 330,
  deviceMemGBps: 448,
  deviceCallFixedUs: 10,
  hostMemGBps: 20,
  hostCallFixedUs: 5,
};

export interface UnitCosts {
  transferUs: number;
  deviceUs: number;
  hostUs: number;
}

/** GB/s is 1e3 bytes per us. */
export function unitCosts(g: ModelGeometry, p: CostParams): UnitCosts {
  return {
    transferUs: p.transferFixedUs + expertBytes(g) / (p.h2dGBps * 1e3),
    deviceUs: p.deviceCallFixedUs + expertBytes(g) / (p.deviceMemGBps * 1e3),
    hostUs: p.hostCallFixedUs + hostExpertBytes(g) / (p.hostMemGBps * 1e3),
  };
}

export type Offload = 'hosted' | 'hostless';

export interface PhaseCounts {
  /** Expert calls served by a resident copy. */
  residentCalls: number;
  /** Calls of non-resident experts. */
  missCalls: number;
  /** Of missCalls, those uploaded for their call (all of them host-less; prefill calls of >= 16 rows hosted). */
  streamedCalls: number;
  /** Uploads decided by the policy that do not serve a call of this phase. */
  extraUploads: number;
}

/** Estimated MoE time of a phase in ms. */
export function phaseMs(c: PhaseCounts, u: UnitCosts): number {
  const hostCalls = c.missCalls - c.streamedCalls;
  const us =
    c.residentCalls * u.deviceUs +
    hostCalls * u.hostUs +
    c.streamedCalls * (u.transferUs + u.deviceUs) +
    c.extraUploads * u.transferUs;
  return us / 1000;
}

/** Parses "k=v,k=v" overrides of the cost parameters. */
export function parseCostOverrides(text: string): CostParams {
  const out: CostParams = { ...costDefaults };
  for (const part of text.split(',').filter((x) => x !== '')) {
    const [k, v] = part.split('=');
    const n = Number(v);
    if (!(k in costDefaults) || !Number.isFinite(n) || n < 0 || (k.endsWith('GBps') && n === 0)) {
      throw new InvalidOptionError(
        '--cost',
        `key=value with key one of ${Object.keys(costDefaults).join(', ')} and a number >= 0 (> 0 for GBps)`,
        part,
      );
    }
    out[k as keyof CostParams] = n;
  }
  return out;
}

/**
 * The memory plan (docs/SPEC.md section 6): how a memory budget splits into what the engine
 * holds, and how many expert slots fit. Pure: the engine gives it the model's byte counts
 * (modelBytes below, and the native contextBytes verb for the KV cache and scratch) and prints
 * or returns the plan.
 *
 *   budget = dense weights (attention, router, norms, embeddings, head: loaded once)
 *          + KV cache (f32, nCtx tokens) + compute scratch (one chunk of rows)
 *          + I/O buffers (reads in flight) + the working set of one layer call (its routed experts
 *            read for that call when none of them is resident: nExpertUsed experts for a decode
 *            token, up to every expert of the layer for a prefill chunk)
 *          + the whole-layer prefill's second layer buffer (when a prompt can take that path;
 *            the first is the working set)
 *          + expert slots (the rest, at the slot stride, spread evenly over the layers)
 *
 * Node's own heap (the JavaScript objects, V8) is outside the budget: it is the process's, not
 * the engine's, and is stated with the plan. A budget below the fixed parts and one working set
 * is refused with MemoryBudgetError, which gives the numbers; a budget at or above the whole
 * model leaves every expert a slot (today's behaviour).
 */
import { InvalidOptionError, MoetierError } from '../core/errors.js';
import { SLOT_ALIGN_BYTES } from '../native/constants.js';

/** What the plan is made from (bytes, except the counts). */
export interface MemoryPlanInput {
  budgetBytes: number;
  /** Every tensor that is not a routed expert's. */
  denseBytes: number;
  kvCacheBytes: number;
  scratchBytes: number;
  /** Buffers for the reads in flight (the I/O engine's bounce buffers). */
  ioBufferBytes: number;
  /** One expert in the container (gate | up | down). */
  expertBytes: number;
  nLayer: number;
  nExpert: number;
  nExpertUsed: number;
  /**
   * Experts one layer call may read for itself (default nExpertUsed: one decode token's). A
   * prefill chunk of R rows routes up to min(nExpert, R x nExpertUsed) distinct experts.
   */
  workingSetExperts?: number;
  /** The whole-layer prefill path's second layer buffer (src/engine/tier/prefill-path.ts); 0 when no prompt can take it. */
  prefillBufferBytes?: number;
  /**
   * The slots are in device memory (a cuda backend), outside the budget: this many per layer, as
   * asked. The budget then bounds the host's parts only, and none of it goes to slots.
   */
  deviceSlotsPerLayer?: number;
}

export interface MemoryPlan {
  budgetBytes: number;
  /** slots: host memory only (0 when the slots are in device memory: deviceSlotsPerLayer). */
  parts: {
    dense: number;
    kvCache: number;
    scratch: number;
    ioBuffers: number;
    workingSet: number;
    prefillBuffer: number;
    slots: number;
  };
  /** Expert slots per layer (the same on every layer), 0..nExpert; on a device, as asked. */
  slotsPerLayer: number;
  slotStrideBytes: number;
  /** The budget holds every expert: no expert is ever read from the file. */
  holdsEveryExpert: boolean;
  /** The slots are in device memory (deviceSlotsPerLayer), outside the budget. */
  slotsOnDevice: boolean;
  /** Budget bytes the plan leaves unused (less than one slot per layer). */
  unusedBytes: number;
}

/** The budget is too small for the parts that do not shrink; the message gives the numbers. */
export class MemoryBudgetError extends MoetierError {
  readonly budgetBytes: number;
  readonly minimumBytes: number;
  constructor(budgetBytes: number, minimumBytes: number, parts: Record<string, number>) {
    const list = Object.entries(parts)
      .map(([k, v]) => `${k} ${formatBytes(v)}`)
      .join(' + ');
    super(
      'E_MEMORY_BUDGET',
      `memory budget ${formatBytes(budgetBytes)} is below what the engine needs at least: ${list} = ${formatBytes(minimumBytes)}`,
    );
    this.budgetBytes = budgetBytes;
    this.minimumBytes = minimumBytes;
  }
}

/** A slot's bytes as the backend counts them: rounded up to the slot alignment. */
export function slotStride(expertBytes: number): number {
  return Math.ceil(expertBytes / SLOT_ALIGN_BYTES) * SLOT_ALIGN_BYTES;
}

export function planMemory(input: MemoryPlanInput): MemoryPlan {
  const stride = slotStride(input.expertBytes);
  const workingSet = (input.workingSetExperts ?? input.nExpertUsed) * stride;
  const fixed = {
    dense: input.denseBytes,
    kvCache: input.kvCacheBytes,
    scratch: input.scratchBytes,
    ioBuffers: input.ioBufferBytes,
    workingSet,
    prefillBuffer: input.prefillBufferBytes ?? 0,
  };
  const minimum =
    fixed.dense + fixed.kvCache + fixed.scratch + fixed.ioBuffers + fixed.workingSet + fixed.prefillBuffer;
  if (input.budgetBytes < minimum) throw new MemoryBudgetError(input.budgetBytes, minimum, fixed);
  const room = input.budgetBytes - minimum;
  if (input.deviceSlotsPerLayer !== undefined) {
    const slotsPerLayer = input.deviceSlotsPerLayer;
    return {
      budgetBytes: input.budgetBytes,
      parts: { ...fixed, slots: 0 },
      slotsPerLayer,
      slotStrideBytes: stride,
      holdsEveryExpert: slotsPerLayer === input.nExpert,
      slotsOnDevice: true,
      unusedBytes: room,
    };
  }
  const slotsPerLayer = Math.min(input.nExpert, Math.floor(room / (stride * input.nLayer)));
  const slots = slotsPerLayer * input.nLayer * stride;
  return {
    budgetBytes: input.budgetBytes,
    parts: { ...fixed, slots },
    slotsPerLayer,
    slotStrideBytes: stride,
    holdsEveryExpert: slotsPerLayer === input.nExpert,
    slotsOnDevice: false,
    unusedBytes: room - slots,
  };
}

const units: Record<string, number> = { '': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4 };

/**
 * A byte size as users type it: 1500000, 64K, 800M, 1.5G (binary units, an optional B or iB:
 * 1.5GiB, 512MB). `option` names the option in the error.
 */
export function parseByteSize(option: string, text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$/i.exec(text);
  const bytes = m ? Math.floor(Number(m[1]) * units[m[2].toUpperCase()]) : Number.NaN;
  if (!Number.isSafeInteger(bytes) || bytes <= 0)
    throw new InvalidOptionError(option, 'a byte size such as 1.5G, 800M or 64K (binary units)', text);
  return bytes;
}

/** `auto`: this share of the memory the system reports available (MemAvailable; the rest stays for Node, the page cache and others). */
export const autoBudgetShare = 0.75;

export function autoBudget(availableBytes: number): number {
  return Math.floor(availableBytes * autoBudgetShare);
}

export function formatBytes(bytes: number): string {
  if (bytes >= 1024 ** 3) return `${(bytes / 1024 ** 3).toFixed(2)} GiB`;
  if (bytes >= 1024 ** 2) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  if (bytes >= 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${bytes} B`;
}

/** A model's dense and expert bytes from its tensor table: routed experts are the ffn_*_exps tensors. */
export function modelBytes(tensors: Iterable<{ name: string; byteLength: number }>): {
  denseBytes: number;
  expertTensorBytes: number;
} {
  let denseBytes = 0,
    expertTensorBytes = 0;
  for (const t of tensors) {
    if (/\.ffn_(gate|up|down)_exps\.weight$/.test(t.name)) expertTensorBytes += t.byteLength;
    else denseBytes += t.byteLength;
  }
  return { denseBytes, expertTensorBytes };
}

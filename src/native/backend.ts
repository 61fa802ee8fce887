/**
 * A typed handle over one native backend (native/include/mt_backend.h): fixed-size slots
 * under a byte budget, asynchronous uploads with timing events, compute markers and leases.
 *
 *   const b = Backend.create('fake', { ...Backend.preset('consumer-8gb'), budgetBytes });
 *   const first = b.reserve(n, slotBytes);
 *   const ev = b.upload(slot, [gate, up, down]);      // returns at once
 *   (await b.wait(ev)).state === 'done'               // or b.query(ev) without blocking
 *   const lease = b.lease(slot); ... b.release(lease); // compute reads the slot meanwhile
 *
 * Native refusals become BackendError with a `reason` the caller branches on ('busy',
 * 'no-overwrite' -> free then upload, ...). A bad slot or event id is a bug: RangeError.
 * A 'cuda' backend that cannot run here is refused at create with DeviceUnavailableError
 * ('not-built', 'load-failed', 'no-driver', 'no-device'); its residents are computed with
 * runExpert (its memory is not host-visible: read() is refused with 'unsupported').
 */
import {
  DeviceUnavailableError,
  InvalidOptionError,
  MoetierError,
  type DeviceUnavailableReason,
} from '../core/errors.js';
import {
  loadNative,
  type NativeBackendConfig,
  type NativeExpertArgs,
  type NativeBackendEvent,
  type NativeBackendHandle,
  type NativeBackendStats,
  type NativeBinding,
  type NativeDiskBackendStats,
} from './binding.js';

/**
 * cpu: RAM slots filled by copies from the mapping; fake: the same on a virtual clock; disk: RAM slots filled by reads of the model file;
 * cuda: device memory through libmoetier_cuda.so (DeviceUnavailableError where it cannot run); cuda-sim: the cuda host code on a simulated
 * runtime (tests).
 */
export type BackendKind = 'cpu' | 'fake' | 'disk' | 'cuda' | 'cuda-sim';
const kinds: ReadonlySet<string> = new Set<BackendKind>(['cpu', 'fake', 'disk', 'cuda', 'cuda-sim']);
export type ExpertArgs = NativeExpertArgs;
export type BackendPresetName = 'consumer-8gb';
export type SlotState = 'empty' | 'uploading' | 'valid' | 'invalid';
export type BackendEvent = NativeBackendEvent;
export type BackendStats = NativeBackendStats;
export type DiskBackendStats = NativeDiskBackendStats;
export type BackendConfig = NativeBackendConfig;

export interface UploadOptions {
  /** Write a valid or invalid slot in place (refused with 'no-overwrite' where unsupported). */
  overwrite?: boolean;
  /** The caller's tag, reported by the event (e.g. invocation and layer, for calibration). */
  label?: number;
  /** What owns the sources' memory; held until the copy ends. */
  keepAlive?: object;
}

/** Why the backend refused (mt_backend_status_name), plus 'transfer': an upload's event failed. */
export type BackendFailure =
  | 'budget'
  | 'busy'
  | 'no-overwrite'
  | 'state'
  | 'no-memory'
  | 'unsupported'
  | 'closed'
  | 'transfer';

/** A refused backend verb or a failed transfer; `code` is E_BACKEND_<REASON>. */
export class BackendError extends MoetierError {
  readonly reason: BackendFailure;
  constructor(reason: BackendFailure, message: string, options?: { cause?: unknown }) {
    super(`E_BACKEND_${reason.toUpperCase().replace('-', '_')}`, message, options);
    this.reason = reason;
  }
}

const failures: ReadonlySet<string> = new Set<BackendFailure>([
  'budget',
  'busy',
  'no-overwrite',
  'state',
  'no-memory',
  'unsupported',
  'closed',
]);

/** Runs a native verb; a native error with a known backendStatus becomes a BackendError. */
function guard<T>(verb: () => T): T {
  try {
    return verb();
  } catch (err) {
    throw typed(err);
  }
}

const unavailableReasons: ReadonlySet<string> = new Set<DeviceUnavailableReason>([
  'not-built',
  'load-failed',
  'no-driver',
  'no-device',
]);

function typed(err: unknown): unknown {
  const unavailable = (err as { deviceUnavailable?: unknown } | null)?.deviceUnavailable;
  if (typeof unavailable === 'string' && unavailableReasons.has(unavailable)) {
    return new DeviceUnavailableError(unavailable as DeviceUnavailableReason, (err as Error).message, { cause: err });
  }
  const status = (err as { backendStatus?: unknown } | null)?.backendStatus;
  if (typeof status === 'string' && failures.has(status)) {
    return new BackendError(status as BackendFailure, (err as Error).message, { cause: err });
  }
  return err;
}

function checkConfig(kind: BackendKind, c: BackendConfig): void {
  const positive = (name: keyof BackendConfig, v: number | undefined, zeroOk = false): void => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || (v === 0 && !zeroOk)) {
      throw new InvalidOptionError(`backend.${name}`, zeroOk ? 'a finite number >= 0' : 'a finite number > 0', v);
    }
  };
  if (!Number.isSafeInteger(c.budgetBytes) || c.budgetBytes <= 0) {
    throw new InvalidOptionError('backend.budgetBytes', 'an integer number of bytes > 0', c.budgetBytes);
  }
  if (kind === 'disk' && c.file === undefined)
    throw new InvalidOptionError('backend.file', 'the mapped model file (mapFile) for the disk backend', c.file);
  if (
    kind === 'cuda-sim' &&
    c.simDeviceBytes !== undefined &&
    (!Number.isSafeInteger(c.simDeviceBytes) || c.simDeviceBytes < 0)
  ) {
    throw new InvalidOptionError(
      'backend.simDeviceBytes',
      'an integer number of bytes >= 0 (0: 1 GiB)',
      c.simDeviceBytes,
    );
  }
  if (c.file !== undefined && kind !== 'disk' && kind !== 'cuda' && kind !== 'cuda-sim') {
    throw new InvalidOptionError(
      'backend.file',
      'a backend kind that reads its uploads from the file (disk, cuda, cuda-sim)',
      kind,
    );
  }
  if (kind === 'cuda-sim') checkFailAfter(c);
  if (kind !== 'fake') return;
  positive('bandwidthBytesPerS', c.bandwidthBytesPerS);
  positive('computeBytesPerS', c.computeBytesPerS);
  positive('transferFixedUs', c.transferFixedUs ?? 0, true);
  checkFailAfter(c);
}

function checkFailAfter(c: BackendConfig): void {
  const failAfter = c.failTransferAfterBytes ?? 0;
  if (!Number.isSafeInteger(failAfter) || failAfter < 0) {
    throw new InvalidOptionError(
      'backend.failTransferAfterBytes',
      'an integer number of bytes >= 0 (0: never)',
      failAfter,
    );
  }
}

export class Backend {
  readonly kind: BackendKind;
  private readonly native: NativeBinding;
  private handle: NativeBackendHandle | undefined;

  private constructor(kind: BackendKind, native: NativeBinding, handle: NativeBackendHandle) {
    this.kind = kind;
    this.native = native;
    this.handle = handle;
  }

  /** Validates the config (InvalidOptionError names the field), then creates the device. */
  static create(kind: BackendKind, config: BackendConfig): Backend {
    if (!kinds.has(kind)) throw new InvalidOptionError('backend', '"cpu", "fake", "disk", "cuda" or "cuda-sim"', kind);
    checkConfig(kind, config);
    const native = loadNative();
    return new Backend(
      kind,
      native,
      guard(() => native.createBackend(kind, config)),
    );
  }

  /** A named fake-device configuration (the numbers live in the native header). */
  static preset(name: BackendPresetName): Required<BackendConfig> {
    return loadNative().backendPreset(name);
  }

  private get h(): NativeBackendHandle {
    if (this.handle === undefined) throw new BackendError('closed', 'the backend was destroyed');
    return this.handle;
  }

  /** Adds n slots of slotBytes each (every call the same size); returns the first new id. */
  reserve(n: number, slotBytes: number): number {
    return guard(() => this.native.slotsReserve(this.h, n, slotBytes));
  }

  /**
   * Starts copying sources back to back into the slot and returns the event id at once.
   * The sources (and keepAlive, e.g. the MappedFileHandle whose buffer they view) are held
   * natively until the copy finished; do not change them, or unmap their file, meanwhile.
   */
  upload(slot: number, sources: ArrayBufferView | ArrayBufferView[], options: UploadOptions = {}): number {
    const list = Array.isArray(sources) ? sources : [sources];
    return guard(() =>
      this.native.upload(this.h, slot, list, options.overwrite ?? false, options.label ?? 0, options.keepAlive),
    );
  }

  get overwriteSupported(): boolean {
    return guard(() => this.native.overwriteSupported(this.h));
  }

  /** Drops the slot's content; refused ('busy') while leased or uploading. */
  free(slot: number): void {
    guard(() => this.native.freeSlot(this.h, slot));
  }

  /** Gives an empty slot's memory back while it stays reserved (cpu / fake: its pages); refused ('state') unless empty. */
  discard(slot: number): void {
    guard(() => this.native.discardSlot(this.h, slot));
  }

  slotState(slot: number): SlotState {
    return guard(() => this.native.slotState(this.h, slot));
  }

  query(event: number): BackendEvent {
    return guard(() => this.native.eventQuery(this.h, event));
  }

  /** Resolves once the event is done or failed (off the event loop). */
  async wait(event: number): Promise<BackendEvent> {
    try {
      return await this.native.eventWait(this.h, event);
    } catch (err) {
      throw typed(err);
    }
  }

  /** wait(), but a failed upload rejects with BackendError('transfer') naming the slot. */
  async waitUploaded(event: number): Promise<BackendEvent> {
    const e = await this.wait(event);
    if (e.state === 'failed') {
      throw new BackendError(
        'transfer',
        `upload into slot ${e.slot} failed after part of its ${e.bytes} bytes; the slot is invalid: free it and upload again`,
      );
    }
    return e;
  }

  /** A compute timing marker; workBytes: weight bytes computed since the previous marker (moves the fake clock). */
  recordCompute(label: number, workBytes = 0): number {
    return guard(() => this.native.computeRecord(this.h, label, workBytes));
  }

  /** Holds a valid slot's content for compute; uploads into it and frees are refused until released. */
  lease(slot: number): number {
    return guard(() => this.native.lease(this.h, slot));
  }

  /** Idempotent: releasing a released lease does nothing. */
  release(lease: number): void {
    guard(() => this.native.release(this.h, lease));
  }

  /** One slot's live leases, or all of them. */
  leaseCount(slot?: number): number {
    return guard(() => this.native.leaseCount(this.h, slot));
  }

  stats(): BackendStats {
    return guard(() => this.native.backendStats(this.h));
  }

  /** Test only (disk): while held, the read engine starts none of the uploads' reads; false lets them go. destroy() ends a hold. */
  holdDiskReads(hold: boolean): void {
    guard(() => this.native.diskHold(this.h, hold));
  }

  /** Copies the slot's bytes into out (tests, debugging); returns the bytes copied. */
  read(slot: number, out: Uint8Array): number {
    return guard(() => this.native.slotRead(this.h, slot, out));
  }

  /**
   * cuda / cuda-sim: y = Down (silu(Gate x) * (Up x)) for args.count rows from the slot (gate | up | down), computed on the
   * device; returns once y is written. The slot must be valid and leased (refused: 'state'); the host kinds refuse ('unsupported').
   */
  runExpert(slot: number, args: ExpertArgs): void {
    guard(() => this.native.runExpert(this.h, slot, args));
  }

  /**
   * cuda / cuda-sim: several residents in one device call (a layer's: one copy in, the kernels
   * back to back, one copy out, one synchronise); each y as runExpert writes it. Returns the
   * device's span of them on the monotonic clock, from the compute stream's events. At most
   * cudaLimits().runsMax runs and expertRowsMax rows in all.
   */
  runExperts(runs: ReadonlyArray<{ slot: number; args: ExpertArgs }>): { startNs: number; endNs: number } {
    return guard(() => this.native.runExperts(this.h, runs));
  }

  /** Test only (cuda / cuda-sim): copies the slot's bytes back from the device into out; returns the bytes copied. */
  readDevice(slot: number, out: Uint8Array): number {
    return guard(() => this.native.cudaSlotRead(this.h, slot, out));
  }

  /** Waits for in-flight uploads and frees the device (deferred while a wait() is pending). Idempotent. */
  destroy(): void {
    if (this.handle === undefined) return;
    const handle = this.handle;
    this.handle = undefined;
    this.native.destroyBackend(handle);
  }
}

/**
 * The addon's diagnostics verbs: what only tests and benches call (ISA control, single kernels and
 * pools, the forward pass's elementwise ops, the read engine on its own, page-cache checks, the
 * debug build's hooks). The engine's verbs are src/native/binding.ts's NativeBinding; the library
 * never imports this file (tests/unit/import-rules.test.ts). One addon: loadDiagnostics() is
 * loadNative()'s object, typed with these verbs too.
 */
import {
  loadNative,
  type NativeIoInfo,
  type NativeIoOptions,
  type NativeIoStats,
  type NativeBackendHandle,
  type NativeBinding,
  type NativeContextHandle,
  type NativeEvalOptions,
  type NativeForwardOps,
  type NativeIoHandle,
  type NativePoolHandle,
  type MappedFileHandle,
} from './binding.js';

/** The read engine (native/addon/io.cc over native/include/mt_io.h): byte ranges of one file into memory, asynchronously. */
export interface NativeIoVerbs {
  /** The C limits (mt_io.h). */
  ioLimits: { queueDepthMax: number; queueDepthDefault: number; queuedMax: number; readBytesMax: number };
  /** An engine over an open fd (the engine reopens the file as its own: the fd may be closed after) or a path. */
  createIo(file: number | string, options?: NativeIoOptions): NativeIoHandle;
  /**
   * Starts reading [offset, offset + bytes) into dst at dstOffset and returns its id at once; dst stays
   * referenced until the read settles. aligned: offset, bytes and dst's address must be multiples of
   * ioStats().alignmentBytes (refused otherwise; never bounced). lane: 0 normal (the default), 1 urgent:
   * a free place takes the urgent lane's queued reads first (mt_io.h, "Lanes"); aligned reads are lane 0's.
   */
  ioRead(
    io: NativeIoHandle,
    offset: number,
    bytes: number,
    dst: Uint8Array,
    dstOffset: number,
    options?: { label?: number; aligned?: boolean; lane?: number },
  ): number;
  ioQuery(io: NativeIoHandle, id: number): NativeIoInfo;
  /** Settles when the read is done or failed (a failed read resolves, with state 'failed'). */
  ioWait(io: NativeIoHandle, id: number): Promise<NativeIoInfo>;
  /** A queued read fails at once (ECANCELED); one in flight runs to its end. */
  ioCancel(io: NativeIoHandle, id: number): void;
  ioStats(io: NativeIoHandle): NativeIoStats;
  /**
   * Test only: while held, queued reads do not start (reads in flight go on), so a queue to cancel or fill stays put.
   * lane: only that lane's queued reads are held (or let go); the other lane's go on.
   */
  ioHold(io: NativeIoHandle, hold: boolean, lane?: number): void;
  /** Fails the queued reads at once (ECANCELED); the engine waits for those in flight and frees itself once the last ioWait / ioProbe on it settled. */
  destroyIo(io: NativeIoHandle): void;
  /** Process-wide: engines alive, their threads, bounce bytes held (leak checks). */
  ioLive(): { engines: number; threads: number; bounceBytes: number };
  /**
   * Benches: the engine's own loop keeps queueDepth reads of `bytes` in flight over `offsets`, into
   * buffers it owns (page-aligned plus dstMisalignBytes); latencyNs per read (end - issued), in offsets order.
   */
  ioProbe(
    io: NativeIoHandle,
    offsets: Float64Array,
    bytes: number,
    options?: { dstMisalignBytes?: number },
  ): Promise<{ wallNs: number; latencyNs: Float64Array; failed: number; firstFailure: string }>;
  /** A zeroed Uint8Array over native memory aligned to alignBytes (a power of two, 8 .. 1 MiB): dst for aligned reads. */
  allocAligned(bytes: number, alignBytes: number): Uint8Array;
}

export interface NativeDiagnostics extends NativeIoVerbs {
  /** Where the cuda kind looks for libmoetier_cuda.so: the loaded addon's directory. */
  cudaLibraryPath(): string;
  /** Whether this build checks the native MT_ASSERT invariants (the debug build, native/build-debug). */
  debugAssertsEnabled(): boolean;
  /**
   * The debug build only: completes a finished upload a second time, as a buggy transfer thread
   * would, so that the backend's invariants abort the process (tests/native/debug-asserts.test.ts).
   */
  debugBackendRecomplete?(b: NativeBackendHandle, event: number): void;
  /** The file's clean pages leave the page cache (fdatasync + posix_fadvise DONTNEED): a cold start for one file. */
  dropFileCache(path: string): void;
  /** Pages of [offset, offset + length) of the mapped file that the page cache holds (mincore); the whole file by default. */
  mappedResidency(
    handle: MappedFileHandle,
    offset?: number,
    length?: number,
  ): { pages: number; resident: number; pageBytes: number };
  /** Kernel path control (tests and benches). */
  isaBest(): number;
  isaActive(): number;
  isaSet(isa: number): boolean;
  /** The best path the CPU reports, before the self-check that isaBest() applies. */
  isaDetected(): number;
  /** A path's self-check against scalar: 1 agrees, 0 disagrees, -1 the CPU lacks it; injectError proves the check can fail. */
  isaVerify(isa: number, injectError?: boolean): number;
  isaName(isa: number): string;
  /** y = W x for a whole matrix W [rows, cols] of typeId, on the calling thread. */
  matvec(typeId: number, weights: Uint8Array, rows: number, cols: number, x: Float32Array, y: Float32Array): void;
  /** Y [n, rows] = X [n, cols] W^T. */
  matmul(
    typeId: number,
    weights: Uint8Array,
    rows: number,
    cols: number,
    x: Float32Array,
    n: number,
    y: Float32Array,
  ): void;
  dequantRow(typeId: number, row: Uint8Array, cols: number, out: Float32Array): void;
  /** A compute pool of `threads` (the caller is thread 0); idle workers spin `spinUs` (default 500: an engine's gap between decode steps) before sleeping. */
  createPool(threads: number, spinUs?: number): NativePoolHandle;
  freePool(pool: NativePoolHandle): void;
  /** matvec / matmul with rows split over the pool's threads (tests and benches). */
  poolMatvec(
    pool: NativePoolHandle,
    typeId: number,
    weights: Uint8Array,
    rows: number,
    cols: number,
    x: Float32Array,
    y: Float32Array,
  ): void;
  poolMatmul(
    pool: NativePoolHandle,
    typeId: number,
    weights: Uint8Array,
    rows: number,
    cols: number,
    x: Float32Array,
    n: number,
    y: Float32Array,
  ): void;
  /**
   * Run `jobs` run-on-every-thread jobs back to back (thread 1 first sleeps `workerDelayUs` in each), each
   * followed by a chunked job of `forChunks` chunks when given; counts how often each thread ran, how many
   * threads ran each job, how often each chunk ran (over all jobs) and how many chunks workers took.
   * stragglerJobs: the pool's count of jobs after which it found a worker not running and stopped spinning.
   * callerGapUs: the caller sleeps that long before each job (an idle gap, as between two evaluations).
   */
  poolCheck(
    pool: NativePoolHandle,
    jobs: number,
    workerDelayUs?: number,
    forChunks?: number,
    callerGapUs?: number,
  ): {
    runsPerThread: number[];
    threadsPerJob: number[];
    nthOk: boolean;
    stragglerJobs: number;
    chunkRuns: number[];
    chunksOnWorkers: number;
  };
  /**
   * The pool's verdict on one wait (pure, no timing): whether waiting `waitedUs` for the other threads
   * under a spin budget of `budgetUs` means a worker was not running; `woke`: the job woke a sleeper.
   */
  poolIsStragglerWait(budgetUs: number, waitedUs: number, woke?: boolean): boolean;
  /**
   * `jobs` chunked jobs back to back, of 2 and maxChunks chunks in turn: the jobs in which a chunk
   * ran other than once (0 when the hand-over from one job to the next is right).
   */
  poolForStress(pool: NativePoolHandle, jobs: number, maxChunks: number): number;
  /**
   * The pool's verdict on the wait after every worker had started (tailUs), given the caller's own
   * share (ownUs): true if a worker was preempted inside its share (past the budget and twice
   * the caller's share); pure.
   */
  poolIsStragglerTail(budgetUs: number, tailUs: number, ownUs: number): boolean;
  /** Streaming read bandwidth (GB/s, 1e9 B/s) over a fresh `bytes` buffer with `threads` threads; blocks ~0.3 s (benches). */
  measureReadBandwidth(bytes: number, threads: number): number;
  /** Same as evalAsync on the calling thread (benchmarks, worker threads). */
  evalSync(
    ctx: NativeContextHandle,
    tokens: Int32Array,
    pos: number,
    logits: Float32Array,
    options?: NativeEvalOptions,
  ): void;
  /** The forward pass's elementwise ops on f32 arrays (tests compare each with plain TypeScript). */
  forwardOps: NativeForwardOps;
}

export function loadDiagnostics(): NativeBinding & NativeDiagnostics {
  return loadNative() as NativeBinding & NativeDiagnostics;
}

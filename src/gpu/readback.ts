/**
 * DeferredScalars: 4-byte values (a step's mean loss, say) that the GPU
 * produces every step and the CPU needs only now and then. Each `record`
 * adds a GPU-side copy of one scalar into a gather buffer (no wait);
 * `collect` reads everything recorded since the last collect with ONE
 * mapAsync. Why: a runtime resolves a GPU→CPU wait on its own clock (Deno's
 * wgpu polls about every 11 ms whatever the work), so a loop that awaits
 * every step's loss runs at the runtime's pace, not the GPU's.
 *
 * Riding along: a DeferredScalars registers with its Gpu as a
 * `ReadbackRider`, so any `gpu.read` (the gradient read of a distributed
 * step) also copies the pending scalars into its own staging buffer. A
 * `collect` after such a read then returns at once, with no second wait.
 *
 * Order: values come back in the order they were recorded; `record` must use
 * the Gpu's own encoder (`gpu.commandEncoder()`), so that the copy runs after
 * the dispatches that computed the value and before later ones overwrite it.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Gpu, ReadbackRider, RiderDelivery } from './gpu.ts';

const SCALAR_BYTES = 4;
/** Scalars a fresh gather buffer holds; it doubles when full (K steps of losses fit easily). */
const INITIAL_CAPACITY = 64;

/** Scalars copied out by one read (ours or a carrying one), filled in when it maps. */
interface Batch {
  values: number[] | null;
  error: unknown;
  done: Promise<void>;
}

export class DeferredScalars implements ReadbackRider {
  private gather: GPUBuffer;
  private capacity: number;
  /** Scalars recorded into `gather` and not yet copied out. */
  private pending = 0;
  /** Scalars copied out since the last collect, in record order (delivered or still in flight). */
  private batches: Batch[] = [];
  /** Gather buffers outgrown while a recorded copy may still use them: destroyed at the next collect. */
  private retired: GPUBuffer[] = [];
  private destroyed = false;

  constructor(
    readonly gpu: Gpu,
    initialCapacity = INITIAL_CAPACITY,
  ) {
    this.capacity = Math.max(1, Math.ceil(initialCapacity));
    this.gather = gpu.storage(this.capacity, 'deferred-scalars');
    gpu.addRider(this);
  }

  /** Values recorded and not yet returned by `collect` (those in flight count once delivered). */
  get count(): number {
    return this.pending + this.batches.reduce((n, b) => n + (b.values?.length ?? 0), 0);
  }

  /**
   * Records a copy of the f32 at `srcOffsetBytes` of `src` (which needs
   * COPY_SRC) into the gather buffer, on `encoder`, which must be the Gpu's
   * open one (`gpu.commandEncoder()`). Never waits.
   */
  record(encoder: GPUCommandEncoder, src: GPUBuffer, srcOffsetBytes: number): void {
    this.check();
    if (
      !Number.isInteger(srcOffsetBytes) ||
      srcOffsetBytes < 0 ||
      srcOffsetBytes % SCALAR_BYTES !== 0 ||
      srcOffsetBytes + SCALAR_BYTES > src.size
    ) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `DeferredScalars.record: offset ${srcOffsetBytes} is not a 4-byte-aligned position inside a buffer of ${src.size} bytes; pass the byte offset of one f32`,
        { srcOffsetBytes, size: src.size },
      );
    }
    if (this.pending === this.capacity) this.grow(encoder);
    encoder.copyBufferToBuffer(src, srcOffsetBytes, this.gather, this.pending * SCALAR_BYTES, SCALAR_BYTES);
    this.pending++;
  }

  /** Everything recorded since the last collect, in order: at most one GPU→CPU wait, none if a read already carried them. */
  async collect(): Promise<number[]> {
    this.check();
    if (this.pending > 0) {
      const bytes = this.pending * SCALAR_BYTES;
      const staging = this.gpu.pool.acquire(
        bytes,
        GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
        'deferred-staging',
      );
      const delivery = this.copyPendingInto(this.gpu.commandEncoder(), staging, 0);
      try {
        await this.gpu.submitRecorded();
        await this.gpu.waitFor('reading deferred scalars', staging.mapAsync(GPUMapMode.READ, 0, bytes));
      } catch (err) {
        delivery.fail(err);
        throw err;
      }
      delivery.deliver(staging.getMappedRange(0, bytes).slice(0));
      staging.unmap();
      this.gpu.pool.release(staging);
    }
    // Reads that carried our values earlier may still be mapping: their own callers wait for them, we only join.
    const batches = this.batches;
    this.batches = [];
    const out: number[] = [];
    for (const b of batches) {
      await b.done;
      if (b.values === null) throw b.error;
      out.push(...b.values);
    }
    for (const b of this.retired) b.destroy();
    this.retired = [];
    return out;
  }

  get pendingBytes(): number {
    return this.pending * SCALAR_BYTES;
  }

  copyPendingInto(encoder: GPUCommandEncoder, staging: GPUBuffer, offset: number): RiderDelivery {
    encoder.copyBufferToBuffer(this.gather, 0, staging, offset, this.pending * SCALAR_BYTES);
    this.pending = 0;
    let settle!: () => void;
    const batch: Batch = { values: null, error: null, done: new Promise<void>((resolve) => (settle = resolve)) };
    this.batches.push(batch);
    return {
      deliver(bytes) {
        batch.values = Array.from(new Float32Array(bytes));
        settle();
      },
      fail(err) {
        batch.error = err;
        settle();
      },
    };
  }

  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.gpu.removeRider(this);
    // Copies into the gather buffer may still be recorded but unsubmitted.
    if (this.gpu.alive) this.gpu.flush();
    this.gather.destroy();
    for (const b of this.retired) b.destroy();
  }

  private check(): void {
    if (this.destroyed)
      throw new RingtrainError(ErrorCode.InvalidArgument, 'this DeferredScalars was destroyed; make a new one');
  }

  /** Doubles the gather buffer, carrying the pending values over on the same encoder. */
  private grow(encoder: GPUCommandEncoder): void {
    const bigger = this.gpu.storage(this.capacity * 2, 'deferred-scalars');
    encoder.copyBufferToBuffer(this.gather, 0, bigger, 0, this.pending * SCALAR_BYTES);
    this.retired.push(this.gather);
    this.gather = bigger;
    this.capacity *= 2;
  }
}

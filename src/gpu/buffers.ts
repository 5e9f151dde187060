/**
 * GPU buffers are slow to create, so training reuses them. The pool keeps
 * released buffers by (size, usage) and hands them out again; every buffer
 * the process creates goes through `BufferPool.create`, which counts it, so a
 * test can check that a warmed-up training step allocates nothing.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';

/** Buffer sizes are rounded up to this many bytes (WebGPU needs multiples of 4; 16 keeps vec4 access safe). */
export const BUFFER_ALIGN = 16;

export function alignSize(bytes: number, align = BUFFER_ALIGN): number {
  return Math.max(align, Math.ceil(bytes / align) * align);
}

export class BufferPool {
  private free = new Map<string, GPUBuffer[]>();
  private owned = new Set<GPUBuffer>();
  /** Number of GPU buffers created so far (never decreases). */
  allocations = 0;
  /** While set (Gpu.compileAhead's attempts), every buffer created is also listed here. */
  private tracked: GPUBuffer[] | null = null;
  /** Bytes of the buffers created so far (never decreases): what a plan that frees nothing holds. */
  createdBytes = 0;
  /** The largest buffer created so far, by its label. */
  largest: { label: string; bytes: number } | null = null;

  constructor(private readonly device: GPUDevice) {}

  /** Creates a new buffer (counted). Prefer `acquire` for scratch buffers. */
  create(size: number, usage: GPUBufferUsageFlags, label?: string, mappedAtCreation = false): GPUBuffer {
    const max = this.device.limits.maxBufferSize;
    if (!(size <= max)) {
      // Past the limit WebGPU only reports a validation error later (which would lose the device): refuse now.
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `a GPU buffer of ${size} bytes${label ? ` (${label})` : ''} exceeds this adapter's maxBufferSize of ${max} bytes; make what it holds smaller`,
        { size, max, label },
      );
    }
    this.allocations++;
    const bytes = alignSize(size);
    this.createdBytes += bytes;
    if (!this.largest || bytes > this.largest.bytes) this.largest = { label: label ?? 'unnamed', bytes };
    const buffer = this.device.createBuffer({ size: bytes, usage, label, mappedAtCreation });
    this.owned.add(buffer);
    this.tracked?.push(buffer);
    return buffer;
  }

  /** Starts listing the buffers created from now on; `stopTracking` returns them. */
  startTracking(): void {
    this.tracked = [];
  }

  stopTracking(): GPUBuffer[] {
    const list = this.tracked ?? [];
    this.tracked = null;
    return list;
  }

  /** Destroys buffers nothing will use (an abandoned attempt's) and stops counting them as held. */
  destroyNow(buffers: readonly GPUBuffer[]): void {
    for (const b of buffers) {
      b.destroy();
      this.owned.delete(b);
    }
  }

  /** Bytes of the buffers created and not destroyed through `destroyNow` (a model's own destroy() is not seen here). */
  get heldBytes(): number {
    let n = 0;
    for (const b of this.owned) n += b.size;
    return n;
  }

  /** A buffer of at least `size` bytes with exactly `usage`, from the free list when one fits. */
  acquire(size: number, usage: GPUBufferUsageFlags, label?: string): GPUBuffer {
    const key = `${alignSize(size)}:${usage}`;
    const list = this.free.get(key);
    const reused = list?.pop();
    return reused ?? this.create(size, usage, label);
  }

  /** Gives a buffer back for reuse. It must not be used by the caller afterwards. */
  release(buffer: GPUBuffer): void {
    const key = `${buffer.size}:${buffer.usage}`;
    let list = this.free.get(key);
    if (!list) this.free.set(key, (list = []));
    list.push(buffer);
  }

  /** Number of buffers waiting in free lists. */
  get idle(): number {
    let n = 0;
    for (const l of this.free.values()) n += l.length;
    return n;
  }

  destroy(): void {
    for (const b of this.owned) b.destroy();
    this.owned.clear();
    this.free.clear();
  }
}

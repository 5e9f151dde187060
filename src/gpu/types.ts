/**
 * What the kernels and the Gpu share, apart from the device itself: bindings,
 * planned dispatches and their capture, uniform field lists, read-back riders,
 * and the small helpers that size dispatches and bindings.
 */
import type { RuntimeName } from '../core/runtime.ts';

export interface GpuInfo {
  runtime: RuntimeName;
  description: string;
  vendor: string;
  architecture: string;
  isFallbackAdapter: boolean;
}

/** A byte range of a buffer, as bind groups take it. `size` omitted = to the end. */
export interface BufferRange {
  buffer: GPUBuffer;
  offset?: number;
  size?: number;
}
export type Binding = GPUBuffer | BufferRange;

/** One planned kernel launch: record it as often as needed. */
export interface Dispatch {
  label: string;
  pipeline: GPUComputePipeline;
  bindGroup: GPUBindGroup;
  workgroups: [number, number, number];
  /** Bytes of storage bound (all bindings added up): how much data the launch can touch. */
  boundBytes: number;
}

/**
 * The dispatches recorded while a capture was open, in order: what the
 * profiler replays one by one, and what structural checks (workgroups per
 * kernel against the batch) read. Capturing copies references only.
 */
export interface DispatchCapture {
  readonly dispatches: readonly Dispatch[];
  stop(): void;
}

export interface PipelineOptions {
  entryPoint?: string;
  /** WGSL `override` values; part of the cache key. */
  constants?: Record<string, number>;
}

/** A uniform struct field list: written in order, 4 bytes each. */
export type UniformField = ['u32' | 'i32' | 'f32', number];

/** WebGPU's guaranteed maxComputeWorkgroupsPerDimension. */
export const MAX_GROUPS_PER_DIM = 65535;

/**
 * Something with GPU-side values waiting to be read (DeferredScalars): a read
 * copies them into its own staging buffer, after the bytes asked for, and
 * hands them over once mapped.
 */
export interface ReadbackRider {
  /** Bytes ready to be copied out now (0: nothing to carry). */
  readonly pendingBytes: number;
  /** Records the copy of the pending bytes into `staging` at `offset`; what it returns receives them once mapped. */
  copyPendingInto(encoder: GPUCommandEncoder, staging: GPUBuffer, offset: number): RiderDelivery;
}

export interface RiderDelivery {
  deliver(bytes: ArrayBuffer): void;
  /** The read that carried the bytes failed. */
  fail(err: unknown): void;
}

/**
 * Storage buffers that kernels read and write and that can be copied in and out.
 * A function, not a constant: under Node the GPUBufferUsage global exists only
 * once the `webgpu` package is loaded.
 */
export function storageUsage(): GPUBufferUsageFlags {
  return GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
}

export function writeFields(bytes: ArrayBuffer, fields: UniformField[]): void {
  const view = new DataView(bytes);
  fields.forEach(([type, value], i) => {
    if (type === 'f32') view.setFloat32(i * 4, value, true);
    else if (type === 'i32') view.setInt32(i * 4, value, true);
    else view.setUint32(i * 4, value, true);
  });
}

/** Bytes a binding covers: the range's size, or the whole buffer past its offset. */
export function bindingBytes(b: Binding): number {
  if ('buffer' in b) return b.size ?? b.buffer.size - (b.offset ?? 0);
  return b.size;
}

/** Workgroup counts covering `n` invocations of `perGroup` each, folded into 2-D when above the per-dimension limit. */
export function linearGroups(n: number, perGroup: number): [number, number, number] {
  const groups = Math.max(1, Math.ceil(n / perGroup));
  if (groups <= MAX_GROUPS_PER_DIM) return [groups, 1, 1];
  const y = Math.ceil(groups / MAX_GROUPS_PER_DIM);
  return [Math.ceil(groups / y), y, 1];
}

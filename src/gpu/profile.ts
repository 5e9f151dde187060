/**
 * Per-kernel GPU time of a captured step (`Gpu.capture()`): each dispatch is
 * run alone, `rounds` times back to back in one compute pass, and timed.
 *
 * - 'timestamp' (the device has `timestamp-query`): one pass per dispatch
 *   with timestamps at its beginning and end, all passes in one submit, one
 *   read: the GPU's own clock, no CPU round trip in the figure.
 * - 'replay' (any device): one submit per dispatch, timed on the CPU from
 *   submit to `onSubmittedWorkDone`, minus what an empty submit costs
 *   (the runtime's wait: Dawn ~0.03 ms, Deno's wgpu ~11 ms on a real GPU).
 *
 * Replays reuse the step's bind groups, so kernels that accumulate in place
 * leave different values behind: profile a model only to measure it.
 * Runtime-agnostic: only WebGPU and `performance.now()`.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Dispatch, Gpu } from './gpu.ts';
import { median } from '../core/stats.ts';

export type KernelTimingMethod = 'timestamp' | 'replay';

export interface KernelTimingOptions {
  /** Runs of each dispatch per measurement (default 10). */
  rounds?: number;
  /** 'auto' (default): timestamps where the device has them, else replay. */
  method?: KernelTimingMethod | 'auto';
}

export interface KernelTimings {
  method: KernelTimingMethod;
  /** GPU milliseconds of one run of each dispatch, in capture order. */
  ms: number[];
  /** Replay only: what an empty submit and its wait took (subtracted). */
  emptySubmitMs?: number;
}

/** One kernel label's share of a step. */
export interface KernelRow {
  label: string;
  dispatches: number;
  /** Workgroups per step, all of this label's dispatches together. */
  workgroups: number;
  /** The smallest and largest single dispatch (1 = a serial kernel). */
  workgroupsMin: number;
  workgroupsMax: number;
  /** GPU milliseconds per step. */
  ms: number;
  /** ms over the step's kernel total (0..1). */
  share: number;
}

/** Timestamp queries per query set: WebGPU's limit on a query set's count. */
const MAX_QUERIES = 4096;

export function hasTimestamps(gpu: Gpu): boolean {
  return gpu.device.features.has('timestamp-query');
}

export async function timeDispatches(
  gpu: Gpu,
  dispatches: readonly Dispatch[],
  options: KernelTimingOptions = {},
): Promise<KernelTimings> {
  const rounds = options.rounds ?? 10;
  if (!Number.isInteger(rounds) || rounds < 1)
    throw new RingtrainError(ErrorCode.InvalidArgument, `rounds must be a whole number ≥ 1, got ${rounds}`, { rounds });
  const method = options.method ?? 'auto';
  if (method === 'timestamp' && !hasTimestamps(gpu)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `this device has no timestamp-query feature (${gpu.info.description}); time kernels by replay instead`,
    );
  }
  // Nothing of the caller's may run inside a measurement.
  await gpu.sync();
  if (method === 'replay' || (method === 'auto' && !hasTimestamps(gpu))) return replay(gpu, dispatches, rounds);
  return timestamps(gpu, dispatches, rounds);
}

function runInPass(pass: GPUComputePassEncoder, d: Dispatch, rounds: number): void {
  pass.setPipeline(d.pipeline);
  pass.setBindGroup(0, d.bindGroup);
  for (let r = 0; r < rounds; r++) pass.dispatchWorkgroups(d.workgroups[0], d.workgroups[1], d.workgroups[2]);
}

async function submitAndWait(gpu: Gpu, encoder: GPUCommandEncoder): Promise<number> {
  const t0 = performance.now();
  gpu.device.queue.submit([encoder.finish()]);
  await gpu.waitFor('profiling a kernel', gpu.device.queue.onSubmittedWorkDone());
  return performance.now() - t0;
}

async function replay(gpu: Gpu, dispatches: readonly Dispatch[], rounds: number): Promise<KernelTimings> {
  const empties: number[] = [];
  for (let i = 0; i < 5; i++)
    empties.push(await submitAndWait(gpu, gpu.device.createCommandEncoder({ label: 'profile-empty' })));
  const emptySubmitMs = median(empties);
  const ms: number[] = [];
  for (const d of dispatches) {
    const encoder = gpu.device.createCommandEncoder({ label: `profile ${d.label}` });
    const pass = encoder.beginComputePass();
    runInPass(pass, d, rounds);
    pass.end();
    ms.push(Math.max(0, (await submitAndWait(gpu, encoder)) - emptySubmitMs) / rounds);
  }
  gpu.check();
  return { method: 'replay', ms, emptySubmitMs };
}

async function timestamps(gpu: Gpu, dispatches: readonly Dispatch[], rounds: number): Promise<KernelTimings> {
  const ms: number[] = [];
  const perSet = MAX_QUERIES / 2;
  for (let start = 0; start < dispatches.length; start += perSet) {
    const chunk = dispatches.slice(start, start + perSet);
    const count = chunk.length * 2;
    const querySet = gpu.device.createQuerySet({ type: 'timestamp', count, label: 'profile-timestamps' });
    const resolved = gpu.device.createBuffer({
      size: count * 8,
      usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC,
      label: 'profile-resolved',
    });
    const staging = gpu.device.createBuffer({
      size: count * 8,
      usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
      label: 'profile-staging',
    });
    try {
      const encoder = gpu.device.createCommandEncoder({ label: 'profile-timestamps' });
      chunk.forEach((d, i) => {
        const pass = encoder.beginComputePass({
          timestampWrites: { querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 },
        });
        runInPass(pass, d, rounds);
        pass.end();
      });
      encoder.resolveQuerySet(querySet, 0, count, resolved, 0);
      encoder.copyBufferToBuffer(resolved, 0, staging, 0, count * 8);
      gpu.device.queue.submit([encoder.finish()]);
      await gpu.waitFor('reading kernel timestamps', staging.mapAsync(GPUMapMode.READ));
      const ticks = new BigUint64Array(staging.getMappedRange().slice(0));
      staging.unmap();
      for (let i = 0; i < chunk.length; i++) {
        const ns = ticks[2 * i + 1] > ticks[2 * i] ? Number(ticks[2 * i + 1] - ticks[2 * i]) : 0;
        ms.push(ns / 1e6 / rounds);
      }
    } finally {
      querySet.destroy();
      resolved.destroy();
      staging.destroy();
    }
  }
  gpu.check();
  return { method: 'timestamp', ms };
}

/** Groups timed dispatches by label, largest GPU time first. */
export function groupByLabel(dispatches: readonly Dispatch[], ms: readonly number[]): KernelRow[] {
  const rows = new Map<string, KernelRow>();
  dispatches.forEach((d, i) => {
    const groups = d.workgroups[0] * d.workgroups[1] * d.workgroups[2];
    let row = rows.get(d.label);
    if (!row)
      rows.set(
        d.label,
        (row = {
          label: d.label,
          dispatches: 0,
          workgroups: 0,
          workgroupsMin: groups,
          workgroupsMax: groups,
          ms: 0,
          share: 0,
        }),
      );
    row.dispatches++;
    row.workgroups += groups;
    row.workgroupsMin = Math.min(row.workgroupsMin, groups);
    row.workgroupsMax = Math.max(row.workgroupsMax, groups);
    row.ms += ms[i];
  });
  const total = ms.reduce((a, b) => a + b, 0);
  const out = [...rows.values()];
  for (const r of out) r.share = total > 0 ? r.ms / total : 0;
  return out.sort((a, b) => b.ms - a.ms || (a.label < b.label ? -1 : a.label > b.label ? 1 : 0));
}

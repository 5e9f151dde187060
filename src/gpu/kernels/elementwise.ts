/**
 * Elementwise vector ops: add (dst += a), scale (dst *= alpha), axpy
 * (dst += alpha·a). `a` and `dst` must be different buffers (WebGPU forbids
 * binding one buffer both read-only and writable in a dispatch). Vectors longer
 * than one binding are planned in slices: a tied weight's gradient (GPT-2's
 * wte, 154 MB) is summed from its two parts with `planAdd`.
 */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../gpu.ts';
import { checkDims, rowSlices, subRange } from './common.ts';
import { defineKernel } from './registry.ts';

defineKernel('elementwise', { shader: 'elementwise', entryPoints: ['add', 'axpy'] });
defineKernel('scale', { shader: 'scale', entryPoints: ['main'] });

function dims(gpu: Gpu, n: number, alpha: number): GPUBuffer {
  checkDims('elementwise', { n });
  return gpu.uniform(
    [
      ['u32', n],
      ['f32', alpha],
      ['u32', 0],
      ['u32', 0],
    ],
    'elementwise-dims',
  );
}

/** One dispatch per slice of at most one binding (one dispatch over the whole bindings when they fit). */
function perSlice(
  gpu: Gpu,
  what: string,
  vectors: Binding[],
  n: number,
  plan: (count: number, slice: Binding[]) => Dispatch,
): Dispatch[] {
  const slices = rowSlices(gpu, n, 1, `${what}: the vectors`);
  if (slices.length === 1) return [plan(n, vectors)];
  return slices.map(({ start, count }) =>
    plan(
      count,
      vectors.map((v) => subRange(v, start, count)),
    ),
  );
}

export function planAdd(gpu: Gpu, a: Binding, dst: Binding, n: number): Dispatch[] {
  return perSlice(gpu, 'add', [a, dst], n, (count, v) =>
    gpu.plan('elementwise', [dims(gpu, count, 1), ...v], linearGroups(count, 256), { entryPoint: 'add' }),
  );
}

export function planAxpy(gpu: Gpu, alpha: number, a: Binding, dst: Binding, n: number): Dispatch[] {
  return perSlice(gpu, 'axpy', [a, dst], n, (count, v) =>
    gpu.plan('elementwise', [dims(gpu, count, alpha), ...v], linearGroups(count, 256), { entryPoint: 'axpy' }),
  );
}

export function planScale(gpu: Gpu, alpha: number, dst: Binding, n: number): Dispatch[] {
  return perSlice(gpu, 'scale', [dst], n, (count, v) =>
    gpu.plan('scale', [dims(gpu, count, alpha), ...v], linearGroups(count, 256)),
  );
}

/** out[outIndex] = scale · Σ x[0..n). One workgroup, deterministic. See shaders/reduce.wgsl. */
import type { Binding, Dispatch, Gpu } from '../gpu.ts';
import { checkDims } from './common.ts';
import { defineKernel } from './registry.ts';

defineKernel('sum', { shader: 'reduce', entryPoints: ['main'] });

export function planSum(
  gpu: Gpu,
  x: Binding,
  out: Binding,
  n: number,
  opts: { outIndex?: number; scale?: number } = {},
): Dispatch {
  checkDims('sum', { n });
  const dims = gpu.uniform(
    [
      ['u32', n],
      ['u32', opts.outIndex ?? 0],
      ['f32', opts.scale ?? 1],
      ['u32', 0],
    ],
    'sum-dims',
  );
  return gpu.plan('reduce', [dims, x, out], [1]);
}

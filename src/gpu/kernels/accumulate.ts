/**
 * Gradient accumulation: adds one micro-batch pass's vector into the step's,
 * weighed by that pass's share of the step (`weights[passIndex]`, a storage
 * buffer the caller writes once per step). The step's first pass overwrites
 * instead, so nothing needs clearing between steps. Vectors longer than one
 * binding are planned in slices, as the elementwise ops are.
 */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../gpu.ts';
import { checkDims, rowSlices, subRange } from './common.ts';
import { defineKernel } from './registry.ts';

defineKernel('accumulate', { shader: 'accumulate', entryPoints: ['main'] });

export interface AccumulateBuffers {
  /** One weight per pass of the step (f32). */
  weights: GPUBuffer;
  /** This pass's vector. */
  src: Binding;
  /** The step's sum, `n` floats. */
  dst: Binding;
}

/** Makes the kernel's pipeline now (under Gpu.compileAhead: throws until it is compiled), before anything is planned with it. */
export function compileAccumulate(gpu: Gpu): void {
  gpu.pipeline('accumulate', {});
}

/** dst = weights[pass]·src (the first pass) or dst += weights[pass]·src, over `n` floats. */
export function planAccumulate(
  gpu: Gpu,
  b: AccumulateBuffers,
  n: number,
  pass: { index: number; first: boolean },
): Dispatch[] {
  checkDims('accumulate', { n, passes: pass.index + 1 });
  return rowSlices(gpu, n, 1, 'accumulate: the vectors').map(({ start, count }) => {
    const dims = gpu.uniform(
      [
        ['u32', count],
        ['u32', pass.index],
        ['u32', pass.first ? 1 : 0],
        ['u32', 0],
      ],
      'accumulate-dims',
    );
    const slice = (v: Binding) => (count === n ? v : subRange(v, start, count));
    return gpu.plan('accumulate', [dims, b.weights, slice(b.src), slice(b.dst)], linearGroups(count, 256));
  });
}

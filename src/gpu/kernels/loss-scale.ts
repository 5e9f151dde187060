/**
 * Dynamic loss scaling's two kernels (shaders/loss_scale.wgsl), over a range of
 * values in slices of one binding each: `seed` multiplies the loss's gradient by
 * S before backward, `unscale` multiplies the parameters' gradients by 1/S after
 * it and raises the overflow flag where one is not finite. `scale` holds [S, 1/S].
 */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../gpu.ts';
import { checkDims, planEntry, rowSlices, subRange } from './common.ts';
import { defineKernel } from './registry.ts';

defineKernel('lossScale', { shader: 'loss_scale', entryPoints: ['seed', 'unscale'] });

export function planLossScale(
  gpu: Gpu,
  entry: 'seed' | 'unscale',
  values: Binding,
  words: number,
  buffers: { scale: GPUBuffer; flag: GPUBuffer },
): Dispatch[] {
  checkDims(`lossScale:${entry}`, { words });
  return rowSlices(gpu, words, 1, `the loss scale's ${entry}`).map(({ start, count }) => {
    const dims = gpu.uniform(
      [
        ['u32', count],
        ['u32', 0],
        ['u32', 0],
        ['u32', 0],
      ],
      `lossScale-${entry}`,
    );
    const bindings: [number, Binding][] = [
      [0, dims],
      [1, buffers.scale],
      [2, subRange(values, start, count)],
    ];
    if (entry === 'unscale') bindings.push([3, buffers.flag]);
    return planEntry(gpu, 'loss_scale', entry, bindings, linearGroups(count, 256));
  });
}

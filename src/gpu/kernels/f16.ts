/**
 * f32 ↔ f16 packing (two halves per u32, low half first). The packed buffer
 * holds ceil(n/2) u32 words. See shaders/f16.wgsl.
 */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../gpu.ts';
import { checkDims } from './common.ts';
import { defineKernel } from './registry.ts';

defineKernel('f16', { shader: 'f16', entryPoints: ['pack', 'unpack'] });

function dims(gpu: Gpu, n: number): GPUBuffer {
  checkDims('f16', { n });
  return gpu.uniform(
    [
      ['u32', n],
      ['u32', 0],
      ['u32', 0],
      ['u32', 0],
    ],
    'f16-dims',
  );
}

export function packedWords(n: number): number {
  return Math.ceil(n / 2);
}

export function planPackF16(gpu: Gpu, floats: Binding, packed: Binding, n: number): Dispatch {
  return gpu.plan('f16', [dims(gpu, n), floats, packed], linearGroups(packedWords(n), 256), { entryPoint: 'pack' });
}

export function planUnpackF16(gpu: Gpu, packed: Binding, floats: Binding, n: number): Dispatch {
  return gpu.plan('f16', [dims(gpu, n), floats, packed], linearGroups(packedWords(n), 256), { entryPoint: 'unpack' });
}

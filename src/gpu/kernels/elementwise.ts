/**
 * Elementwise vector ops: add (dst += a), scale (dst *= alpha), axpy
 * (dst += alpha·a). `a` and `dst` must be different buffers (WebGPU forbids
 * binding one buffer both read-only and writable in a dispatch).
 */
import { linearGroups, type Binding, type Dispatch, type Gpu } from '../gpu.ts';
import { checkDims } from './common.ts';
import { defineKernel } from './registry.ts';

defineKernel('elementwise', { shader: 'elementwise', entryPoints: ['add', 'axpy'] });
defineKernel('scale', { shader: 'scale', entryPoints: ['main'] });

function dims(gpu: Gpu, n: number, alpha: number): GPUBuffer {
  checkDims('elementwise', { n });
  return gpu.uniform([['u32', n], ['f32', alpha], ['u32', 0], ['u32', 0]], 'elementwise-dims');
}

export function planAdd(gpu: Gpu, a: Binding, dst: Binding, n: number): Dispatch {
  return gpu.plan('elementwise', [dims(gpu, n, 1), a, dst], linearGroups(n, 256), { entryPoint: 'add' });
}

export function planAxpy(gpu: Gpu, alpha: number, a: Binding, dst: Binding, n: number): Dispatch {
  return gpu.plan('elementwise', [dims(gpu, n, alpha), a, dst], linearGroups(n, 256), { entryPoint: 'axpy' });
}

export function planScale(gpu: Gpu, alpha: number, dst: Binding, n: number): Dispatch {
  return gpu.plan('scale', [dims(gpu, n, alpha), dst], linearGroups(n, 256));
}

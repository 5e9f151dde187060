/**
 * The kernel registry: every kernel family declares itself where its planning
 * code lives (`defineKernel` at the top of the file), so the list of kernels
 * is whatever files are loaded, never a hand list that drifts. The GPU
 * layer's own kernels (matmul, reductions, optimizers, …) register when
 * `src/gpu/kernels/index.ts` loads; an op's kernels register when its folder
 * under `src/nn/ops/` loads, which importing `src/nn` (or the package) does.
 *
 * `warmUp` compiles what is registered; tests use the registry to check that
 * every shader file has a kernel and an oracle.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import type { Gpu } from '../gpu.ts';

export interface KernelEntry {
  /** `shaders/<shader>.wgsl` */
  shader: string;
  entryPoints: string[];
  /** Override constants the kernel is compiled with by default. */
  constants?: Record<string, number>;
  /** A device feature the shader needs (`enable f16;`): adapters without it never compile it. */
  requires?: GPUFeatureName;
}

const kernels: Record<string, KernelEntry> = {};

/** Every registered kernel by name (a live view: it grows as kernel files load). */
export const KERNELS: Readonly<Record<string, KernelEntry>> = kernels;

/** Declares a kernel family: its shader file, entry points and default override constants. */
export function defineKernel(name: string, entry: KernelEntry): KernelEntry {
  const known = kernels[name];
  if (known && JSON.stringify(known) !== JSON.stringify(entry)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `kernel ${name} is defined twice, as ${JSON.stringify(known)} and ${JSON.stringify(entry)}; give the second one another name`,
      { kernel: name },
    );
  }
  kernels[name] = entry;
  return entry;
}

/** Compiles every registered kernel's pipelines (surfacing WGSL errors early). */
export function warmUp(gpu: Gpu): void {
  for (const k of Object.values(kernels)) {
    if (k.requires && !gpu.device.features.has(k.requires)) continue;
    for (const entryPoint of k.entryPoints) gpu.pipeline(k.shader, { entryPoint, constants: k.constants });
  }
}

/**
 * A device that plans but never runs, for `train --dry-run`: it takes the
 * real adapter's limits and features, so every refusal for size happens as
 * it would, and the buffer pool counts every byte a plan creates, but no
 * buffer holds memory beyond the host bytes a mapped upload writes, no
 * shader is compiled and nothing can be submitted.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { Gpu, type GpuOptions } from './gpu.ts';

function cannotRun(what: string): never {
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    `${what} on a planning-only Gpu (train --dry-run): it sizes a plan and runs nothing`,
  );
}

function plannedBuffer(d: GPUBufferDescriptor): GPUBuffer {
  return {
    size: d.size,
    usage: d.usage,
    label: d.label ?? '',
    mapState: 'unmapped',
    // Uploads write the initial values through the mapping: give them somewhere to go.
    getMappedRange: (offset = 0, size = d.size - offset) => new ArrayBuffer(size),
    unmap: () => {},
    destroy: () => {},
    mapAsync: () => Promise.reject(cannotRun('reading a buffer')),
  } as unknown as GPUBuffer;
}

function planningDevice(real: GPUDevice): GPUDevice {
  const pipeline = { getBindGroupLayout: () => ({}) } as unknown as GPUComputePipeline;
  const device = {
    limits: real.limits,
    features: real.features,
    lost: new Promise<never>(() => {}),
    addEventListener: () => {},
    createBuffer: plannedBuffer,
    createShaderModule: () => ({}),
    createComputePipeline: () => pipeline,
    createComputePipelineAsync: () => Promise.resolve(pipeline),
    createBindGroup: () => ({}),
    createCommandEncoder: () => cannotRun('encoding commands'),
    queue: {
      writeBuffer: () => {},
      submit: () => cannotRun('submitting work'),
      onSubmittedWorkDone: () => Promise.reject(cannotRun('waiting for work')),
    },
    destroy: () => {},
  };
  return device as unknown as GPUDevice;
}

/** A Gpu over `real`'s adapter limits (and `options`) that only plans: see the file's comment. */
export function planningGpu(real: Gpu, options: GpuOptions = {}): Gpu {
  return new Gpu(
    planningDevice(real.device),
    { ...real.info },
    { maxBindingBytes: real.maxBindingBytes, subgroups: real.subgroups, stepParts: false, ...options },
  );
}

/** The GPU layer: device acquisition, shader registry, pipelines, buffers, kernels. */
export { acquireGpu, NO_ADAPTER_HELP, type AcquireOptions } from './device.ts';
export {
  Gpu,
  linearGroups,
  storageUsage,
  type Binding,
  type BufferRange,
  type Dispatch,
  type GpuInfo,
  type PipelineOptions,
  type ReadbackRider,
  type RiderDelivery,
  type UniformField,
} from './gpu.ts';
export { BufferPool, alignSize } from './buffers.ts';
export { registerShaders, shaderSource, hasShader, registeredShaderKeys, shaderKeyOf } from './shaders.ts';
export { DeferredScalars } from './readback.ts';

/** The collectives: pure functions over a Communicator, knowing nothing of the transport beneath. */
export { allreduce, allreduceInPlace } from './allreduce.ts';
export {
  defineAllreduceAlgorithm,
  allreduceAlgorithms,
  type AllreduceAlgorithm,
  type AllreduceShape,
} from './algorithms/index.ts';
export { reducescatter, reducescatterRange } from './reducescatter.ts';
export { allgather } from './allgather.ts';
export { broadcast } from './broadcast.ts';
export { alltoall } from './alltoall.ts';
export { barrier } from './barrier.ts';
export {
  allreduceFused,
  planFusion,
  DEFAULT_FUSION_THRESHOLD_BYTES,
  type NamedTensor,
  type FusionOptions,
} from './fusion.ts';
export { float32ToFloat16, float32ToFloat16Ieee, float16ToFloat32, FP16_MAX } from './codecs/fp16.ts';
export { ResponseCache, cacheOf, DEFAULT_CACHE_CAPACITY } from './controller/cache.ts';
export * from './codecs/types.ts';
export { addProcessSet, ProcessSet, MAX_PROCESS_SETS } from './controller/process-set.ts';

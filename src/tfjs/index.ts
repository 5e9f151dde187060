/**
 * ringtrain/tfjs: Horovod for TensorFlow.js. Bring your TF.js model and
 * optimizer (and your own TF.js and backend: they are peer dependencies);
 * ringtrain averages the gradients over its ring.
 *
 *   const session = await init({ server });           // joins the job, forms the ring
 *   model.compile({ optimizer: new DistributedOptimizer(tf.train.sgd(0.01 * session.size)), ... });
 * await model.fit(...shardTensors([x, y]), { callbacks: [new BroadcastGlobalVariablesCallback(0), new
 *   MetricAverageCallback()] });
 *
 * This entry is the browser's; Node and Deno get index.node.ts (the same,
 * with init() bringing its own WebSocket and WebRTC).
 */
import { init as initSession, type InitOptions, type Session } from '../distributed/session/session.ts';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { setDefaultRing } from './ring.ts';

export type { InitOptions, Session } from '../distributed/session/session.ts';
export type { Communicator } from '../comm/communicator.ts';
export { createMemoryRing } from '../comm/rings.ts';
export { DistributedOptimizer, setLearningRate, type DistributedOptimizerOptions } from './optimizer.ts';
export {
  broadcastVariables,
  broadcastOptimizerState,
  type TfBroadcastOptions,
  type VariableSource,
} from './broadcast.ts';
export {
  BroadcastGlobalVariablesCallback,
  MetricAverageCallback,
  LearningRateWarmupCallback,
  StopTogetherCallback,
  type RingCallbackOptions,
  type WarmupOptions,
  type StopTogetherOptions,
} from './callbacks.ts';
export { TrainEventsCallback, type TrainEventsOptions } from './progress.ts';
export { shardIndices, shardTensors, shardArray, shardDataset, type ShardOptions, type DatasetLike } from './shard.ts';
export { agreeOnLayout, describeVariables, type VariableSpec } from './layout.ts';
export { setDefaultRing, type RingSource } from './ring.ts';
/** Horovod's hvd.elastic: `elastic.run`, `elastic.ModelState`, `elastic.CommitStateCallback` (elastic.ts). */
export * as elastic from './elastic.ts';

/** Joins the job (ringtrain's init) and makes its ring the default of every helper here. Under Node and Deno the launcher's environment fills in server, job and token. */
export async function init(o: Partial<InitOptions> = {}): Promise<Session> {
  for (const key of ['server', 'job', 'token'] as const) {
    if (!o[key])
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `init: no ${key}; pass { server, job, token } (the page has them from its address)`,
      );
  }
  const session = await initSession(o as InitOptions);
  setDefaultRing(session);
  return session;
}

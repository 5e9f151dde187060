/**
 * `ringtrain` under Node and Deno: everything of index.ts, plus the pieces
 * that touch files (checkpoint files, model files, the data sets' loaders)
 * and an init() that brings the `ws` WebSocket and @roamhq/wrtc.
 */
export * from './index.ts';
/** Datasets, batches, sharding by rank, and the loaders that read files (MNIST, IDX, the words). */
export * as data from './lib/data.node.ts';
export { initFromEnvironment as init } from './distributed/session/launch-env.node.ts';
export { saveCheckpoint, loadCheckpoint } from './checkpoint/file.node.ts';
/** A model file's factory and name (`--model ./file.ts`'s), for createModel(gpu, factory, { name }). */
export { loadModelFile } from './engine/model-file.node.ts';

/**
 * What one state check costs a rank (src/distributed/robust/state-agreement.ts): the
 * read-back of the weights and the optimizer state, their SHA-256, and the
 * 32-byte allgather, beside one training step of the same model for scale.
 * Models: the words workload's transformer (AdamW, 105,627 parameters) and a
 * ~10M-parameter one (8 layers of width 320). The allgather runs on a ring of
 * 2 over memory links: the bytes are too few for a link's bandwidth to show,
 * so a real ring adds one round trip.
 *
 *   npx tsx bench/state-check-cost.ts [--repeats 3] [--batch 64]
 *   deno run -A bench/state-check-cost.ts
 *
 * One JSON line per model: {"bench":"state-check-cost", model, params, state_bytes,
 *   read_ms, hash_ms, allgather_ms, check_ms, step_ms, check_over_step}
 */
import { allgather } from '../src/collectives/allgather.ts';
import { LinkCommunicator } from '../src/comm/communicator.ts';
import { memoryMesh } from '../src/comm/memory-link.ts';
import { EventBus } from '../src/core/events.ts';
import { stateDigest } from '../src/distributed/robust/state-agreement.ts';
import { createModel } from '../src/engine/create.ts';
import { createOptimizer } from '../src/engine/optimizer.ts';
import type { TransformerSpec } from '../src/engine/transformer.ts';
import { acquireGpu } from '../src/gpu/device.ts';
import { opt } from './args.ts';

const repeats = Number(opt('repeats', '3'));
const batch = Number(opt('batch', '64'));
const MODELS: { name: string; spec: TransformerSpec }[] = [
  { name: 'words transformer', spec: { kind: 'transformer', seed: 1 } },
  { name: 'transformer 8x320 (~10M)', spec: { kind: 'transformer', seed: 1, layers: 8, width: 320, heads: 4 } },
];

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Mean ms of a 32-byte allgather on a ring of 2 over memory links (after one that negotiates). */
async function allgatherMs(): Promise<number> {
  const comms = memoryMesh(2).map(
    (links, rank) => new LinkCommunicator(rank, 2, links, { events: new EventBus(), peerTimeoutMs: 0 }),
  );
  const once = () => Promise.all(comms.map((c) => allgather(c, new Int32Array(8), { name: 'state-hash' })));
  await once();
  const t = performance.now();
  for (let i = 0; i < 20; i++) await once();
  return (performance.now() - t) / 20;
}

const gpu = await acquireGpu();
const gatherMs = await allgatherMs();
for (const { name, spec } of MODELS) {
  const model = createModel(gpu, spec);
  const optimizer = createOptimizer(model, { kind: 'adamw', lr: 1e-3 });
  const context = spec.context ?? 32;
  const x = Float32Array.from({ length: batch * context }, (_, i) => (i * 7) % 27);
  const labels = Int32Array.from({ length: batch * context }, (_, i) => (i * 11) % 27);
  const step = async () => {
    await model.forwardBackward(x, labels);
    optimizer.step();
  };
  await step(); // compiles every kernel
  let t = performance.now();
  await step();
  await model.readParams(); // the update is done once its weights can be read
  const stepMs = performance.now() - t;
  const reads: number[] = [];
  const hashes: number[] = [];
  let stateBytes = 0;
  for (let r = 0; r < repeats; r++) {
    t = performance.now();
    const params = await model.readParams();
    const state = await optimizer.exportState();
    reads.push(performance.now() - t);
    stateBytes = params.byteLength + Object.values(state).reduce((n, s) => n + s.byteLength, 0);
    t = performance.now();
    await stateDigest(params, state);
    hashes.push(performance.now() - t);
  }
  const [readMs, hashMs] = [mean(reads), mean(hashes)];
  const checkMs = readMs + hashMs + gatherMs;
  console.log(
    JSON.stringify({
      bench: 'state-check-cost',
      runtime: gpu.info.runtime,
      adapter: gpu.info.description,
      model: name,
      params: model.paramCount,
      state_bytes: stateBytes,
      batch,
      read_ms: +readMs.toFixed(1),
      hash_ms: +hashMs.toFixed(1),
      allgather_ms: +gatherMs.toFixed(2),
      check_ms: +checkMs.toFixed(1),
      step_ms: +stepMs.toFixed(0),
      check_over_step: +(checkMs / stepMs).toFixed(3),
    }),
  );
  optimizer.destroy();
  model.destroy();
}
gpu.destroy();

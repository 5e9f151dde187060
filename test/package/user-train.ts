/**
 * A user's training script, written from the README's "Use it as a library":
 * a small MLP on made-up data (two spirals) with AdamW, a DistributedOptimizer
 * and broadcastParameters. test/package/installed.test.ts copies it into a
 * fresh project that installed the packed tarball, type-checks it there and
 * runs it under Node alone, under Deno and under `ringtrain launch -np 2`.
 *
 * Each step takes a global batch of 32 points and every rank its own slice
 * of it (32 / size), so any number of ranks takes the steps one process takes.
 * It uses no runtime's own API (no node: import, no Deno global), so one file
 * runs in both. Prints one JSON line: rank, size, the last loss and the weights.
 */
import {
  acquireGpu,
  broadcastParameters,
  data,
  createModel,
  DistributedOptimizer,
  init,
  nn,
  optim,
  type Tensor,
} from 'ringtrain';

const STEPS = 10;
const GLOBAL_BATCH = 32;

/** Two interleaved spirals: point i of class c (both from a fixed formula, so every rank makes the same set). */
function spirals(count: number): { inputs: Float32Array; labels: Int32Array } {
  const inputs = new Float32Array(count * 2);
  const labels = new Int32Array(count);
  for (let i = 0; i < count; i++) {
    const c = i % 2;
    const t = (i / count) * 3 * Math.PI;
    inputs[2 * i] = (t / 10) * Math.cos(t + c * Math.PI);
    inputs[2 * i + 1] = (t / 10) * Math.sin(t + c * Math.PI);
    labels[i] = c;
  }
  return { inputs, labels };
}

class Net extends nn.Module {
  fc1 = new nn.Linear(2, 16);
  fc2 = new nn.Linear(16, 2);
  forward(x: Tensor): Tensor {
    return this.fc2.call(nn.F.relu(this.fc1.call(x)));
  }
}

const session = await init();
const gpu = await acquireGpu();
try {
  const { rank, size } = session.comm;
  const batch = GLOBAL_BATCH / size;
  const points = spirals(512);
  const set = data.makeDataset({
    inputs: points.inputs,
    inputSize: 2,
    labels: points.labels,
    positions: 1,
    classes: 2,
  });
  const model = createModel(gpu, new Net(), { inputShape: [2], classes: 2, seed: 1 + rank });
  const opt = new DistributedOptimizer(session, model, new optim.AdamW(model, { lr: 0.01 }));
  await broadcastParameters(session.comm, model);
  const order = data.permutation(set.count, 7);
  let loss = NaN;
  for (let step = 0; step < STEPS; step++) {
    const first = step * batch * size + rank * batch;
    const idx = Uint32Array.from({ length: batch }, (_, i) => order[(first + i) % set.count]!);
    const b = data.batchOf(set, idx);
    loss = await model.forwardBackward(b.x, b.labels);
    await opt.step();
  }
  const weights = Array.from(await model.readParams());
  console.log(JSON.stringify({ rank, size, steps: STEPS, loss, weights }));
  model.destroy();
} finally {
  await session.close();
  gpu.destroy();
}

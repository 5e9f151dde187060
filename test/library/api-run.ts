/**
 * A tiny model trained through the public API alone (`import … from 'ringtrain'`),
 * as a user's program would: a module with Dropout, a dataset, sharded batches,
 * AdamW, evaluation, predict, weights saved and loaded as safetensors, and two
 * replicas on a memory ring kept equal by broadcastParameters and the
 * DistributedOptimizer. Runs under Node (api.test.ts imports it) and Deno
 * (api.test.ts runs this file with `deno run -A`: it prints one JSON line).
 */
import {
  acquireGpu,
  allreduce,
  broadcastParameters,
  createMemoryRing,
  data,
  DistributedOptimizer,
  createModel,
  loadSafetensors,
  nn,
  optim,
  predict,
  saveSafetensors,
  trainStep,
  type Tensor,
} from 'ringtrain';

export interface ApiRun {
  runtime: string;
  firstLoss: number;
  lastLoss: number;
  accuracy: number;
  evalLosses: [number, number];
  predictedClasses: number[];
  reloadedEqual: boolean;
  allreduced: number[];
  replicasEqual: boolean;
}

class Net extends nn.Module {
  fc1 = new nn.Linear(4, 32);
  drop = new nn.Dropout(0.2, 5);
  fc2 = new nn.Linear(32, 3);
  forward(x: Tensor): Tensor {
    return this.fc2.call(this.drop.call(nn.F.relu(this.fc1.call(x))));
  }
}

export async function runApi(): Promise<ApiRun> {
  const gpu = await acquireGpu();
  try {
    // Three classes by the sign pattern of the first two features.
    let s = 7;
    const rand = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32) * 2 - 1;
    const count = 256;
    const inputs = Float32Array.from({ length: count * 4 }, rand);
    const labels = Array.from({ length: count }, (_, i) => (inputs[i * 4] > 0 ? (inputs[i * 4 + 1] > 0 ? 2 : 1) : 0));
    const set = data.makeDataset({ inputs, inputSize: 4, labels, positions: 1, classes: 3 });

    const model = createModel(gpu, new Net(), { inputShape: [4], classes: 3, seed: 1 });
    const opt = new optim.AdamW(model, { lr: 0.02 });
    const sampler = new data.DistributedSampler(set.count, { rank: 0, size: 1, seed: 3 });
    const losses: number[] = [];
    for (let epoch = 0; epoch < 4; epoch++) {
      for (const b of data.batches(set, { batchSize: 32, indices: sampler.indices(epoch) }))
        losses.push(await trainStep(model, opt, b.x, b.labels));
    }
    const e1 = await model.evaluate(set.inputs, set.labels);
    const e2 = await model.evaluate(set.inputs, set.labels);
    const rows = [0, 1, 2, 3, 4].map((i) => Array.from(inputs.subarray(i * 4, i * 4 + 4)));
    const p = await predict(model, rows);

    const bytes = await saveSafetensors(model);
    const copy = createModel(gpu, new Net(), { inputShape: [4], classes: 3, seed: 99 });
    loadSafetensors(copy, bytes);
    const q = await predict(copy, rows);
    const reloadedEqual = q.logits.every((l, i) => l.every((v, j) => v === p.logits[i][j]));

    // Horovod-style: two ranks over a memory ring.
    const comms = createMemoryRing(2);
    const allreduced = await Promise.all(
      comms.map((c) => allreduce(c, Float32Array.of(c.rank + 1, 10), { op: 'average' })),
    );
    const replicas = [0, 1].map((r) => createModel(gpu, new Net(), { inputShape: [4], classes: 3, seed: 10 + r }));
    await Promise.all(replicas.map((m, r) => broadcastParameters(comms[r], m)));
    const dopts = replicas.map((m, r) => new DistributedOptimizer(comms[r], m, new optim.SGD(m, { lr: 0.1 })));
    for (let step = 0; step < 3; step++) {
      await Promise.all(
        replicas.map(async (m, r) => {
          const idx = Uint32Array.from({ length: 16 }, (_, i) => (step * 32 + r * 16 + i) % count);
          const b = data.batchOf(set, idx);
          await m.forwardBackward(b.x, b.labels);
          await dopts[r].step();
        }),
      );
    }
    const [w0, w1] = await Promise.all(replicas.map((m) => m.readParams()));
    const replicasEqual = w0.every((v, i) => v === w1[i]) && w0.some((v) => v !== 0);

    for (const m of [model, copy, ...replicas]) m.destroy();
    opt.destroy();
    return {
      runtime: gpu.info.runtime,
      firstLoss: losses[0],
      lastLoss: losses[losses.length - 1],
      accuracy: e1.accuracy,
      evalLosses: [e1.loss, e2.loss],
      predictedClasses: p.classes,
      reloadedEqual,
      allreduced: Array.from(allreduced[1]),
      replicasEqual,
    };
  } finally {
    gpu.destroy();
  }
}

// Run directly (Deno): one JSON line on stdout.
if ((import.meta as ImportMeta & { main?: boolean }).main) console.log(JSON.stringify(await runApi()));

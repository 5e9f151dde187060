/**
 * Your own training loop on ringtrain's API, data-parallel the way Horovod
 * does it (`horovodrun -np 2 python train.py`):
 *
 *   npx ringtrain launch -np 2 examples/train-loop.ts --steps 300 --batch 32
 *
 * `launch` starts a signaling server and 2 processes of this file; `init()`
 * finds the job in the environment they get and joins the ring over WebRTC.
 * Every rank builds the same model, takes rank 0's weights
 * (broadcastParameters), and each step trains on its own slice of one global
 * batch of `--batch` × size digits; the DistributedOptimizer averages the
 * gradients over the ring before the update, so N ranks at --batch B take the
 * steps one process takes at N·B (test/library/train-loop.test.ts checks it).
 * `--save PATH` writes rank 0's weights as safetensors (PyTorch's
 * `load_state_dict(safetensors.torch.load_file(PATH))` reads them).
 *
 * Elastic (`hvd.elastic`): with `launch --elastic`, workers may die or join
 * mid-run; the loop runs under elastic.run with an elastic.State that
 * commits after every step, and the ring re-forms and carries on from the
 * last commit (test/library/train-loop.test.ts kills one of 3).
 */
import { writeFileSync } from 'node:fs';
import process from 'node:process';
import {
  acquireGpu,
  broadcastParameters,
  data,
  DistributedOptimizer,
  createModel,
  elastic,
  ErrorCode,
  init,
  nn,
  optim,
  RingtrainError,
  saveSafetensors,
  type Tensor,
} from 'ringtrain';

function flag(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  const value = at < 0 ? fallback : Number(process.argv[at + 1]);
  if (!Number.isFinite(value) || value <= 0)
    throw new RingtrainError(ErrorCode.InvalidArgument, `--${name} takes a number > 0, got ${process.argv[at + 1]}`);
  return value;
}
const steps = flag('steps', 300);
const batch = flag('batch', 32); // per rank
const lr = flag('lr', 0.05);
const seed = flag('seed', 1);
const saveAt = process.argv.indexOf('--save');
const save = saveAt < 0 ? undefined : process.argv[saveAt + 1];

class Net extends nn.Module {
  fc1 = new nn.Linear(784, 64);
  fc2 = new nn.Linear(64, 10);
  forward(x: Tensor): Tensor {
    return this.fc2.call(nn.F.relu(this.fc1.call(x)));
  }
}

const session = await init(); // hvd.init()
const gpu = await acquireGpu();
try {
  const { train, test } = await data.loadMnist();
  // Each rank starts from its own random weights; the broadcast (or the elastic state's sync) makes them rank 0's.
  const model = createModel(gpu, new Net(), { inputShape: [784], classes: 10, seed: seed + session.rank });
  // Over the session (or session.comm, which the session records as its own): the optimizer reduces over whatever ring
  // the session holds now (an elastic one re-forms).
  const opt = new DistributedOptimizer(session, model, new optim.SGD(model, { lr })); // hvd.DistributedOptimizer(opt)

  // One order of the training digits, the same on every rank (same seed). A step takes the next
  // batch × size of them after the `taken` ones, and this rank its own slice of those.
  const order = data.permutation(train.count, seed);
  const takeStep = async (taken: number): Promise<number> => {
    const { rank, size } = session.comm; // the current ring's: an elastic ring re-forms smaller or larger
    const idx = Uint32Array.from({ length: batch }, (_, i) => order[(taken + rank * batch + i) % train.count]);
    const b = data.batchOf(train, idx);
    await model.forwardBackward(b.x, b.labels);
    await opt.step();
    return taken + batch * size;
  };
  const progress = (step: number) => {
    if (session.comm.rank === 0 && step % 10 === 0) console.log(`step ${step} on ${session.comm.size} peers`);
  };

  let regroups = 0;
  if (session.settings.membership.elastic) {
    // `launch --elastic`: a peer may die (or join) mid-run; the ring re-forms and training goes on
    // from the last commit (hvd.elastic.run with a TorchState).
    const state = new elastic.State(session, model, opt);
    await elastic.run(state, async (s) => {
      while (s.steps < steps) {
        s.examples = await takeStep(s.examples);
        s.steps++;
        await s.commit();
        progress(s.steps);
      }
    });
    regroups = state.regroups;
  } else {
    await broadcastParameters(session.comm, model); // hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for (let step = 0, taken = 0; step < steps; step++) {
      taken = await takeStep(taken);
      progress(step + 1);
    }
  }

  // Every rank says where it ended: replicas hold the same weights, so the same norm.
  const params = await model.readParams();
  const norm = Math.sqrt(params.reduce((sum, v) => sum + v * v, 0));
  const { rank, size } = session.comm;
  const summary: Record<string, number> = { rank, size, steps, batch, regroups, weights_norm: norm };
  if (rank === 0) {
    const { accuracy, loss } = await model.evaluate(test.inputs, test.labels);
    Object.assign(summary, { test_accuracy: accuracy, test_loss: loss });
    if (save) writeFileSync(save, await saveSafetensors(model));
  }
  console.log(JSON.stringify(summary));
  model.destroy();
} finally {
  await session.close();
  gpu.destroy();
}

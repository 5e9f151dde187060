/**
 * Agreement on state over a real ring (issue 37, item 3): three Node peers join
 * a job on a real signaling server, open real WebRTC links, and train the MLP
 * on the software adapter as a worker does (trainAsPeer). Between steps the
 * test writes other weights into one peer's model through the model's own API
 * (writeParams), the way a bad resume or a faulty GPU would leave them.
 *
 * - Once: every rank names it at the next state check (within stateCheckEvery
 *   steps) and it is resynced from the majority; every rank ends with one
 *   `weightsHash`. The digests of each check's step ride beside the next
 *   step's gradient allreduce: that step waits for no round more than a step
 *   without them (RoundCounter). The same run with the checks off ends with two.
 * - Again after its resync (an elastic job): it is reported, the server ejects
 *   it, and the two others finish with one `weightsHash`.
 * - Two peers that differ: no majority, both stop with ERR_STATE_MISMATCH.
 * Runs inside the private network namespace.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { ErrorCode, type RingtrainError } from '../../src/core/errors.ts';
import type { RingEvent } from '../../src/core/events.ts';
import { selectExamples } from '../../src/data/dataset.ts';
import { loadMnist } from '../../src/data/mnist.node.ts';
import { trainConfigFromJob } from '../../src/distributed/train/job-config.ts';
import { trainAsPeer } from '../../src/distributed/train/peer.ts';
import { init, type Session } from '../../src/distributed/session/session.node.ts';
import type { DistributedTrainConfig, DistributedTrainResult } from '../../src/distributed/train/trainer.ts';
import type { PreparedTraining } from '../../src/distributed/train/warm-up.ts';
import { modelSpecFor } from '../../src/distributed/train/model-fit.ts';
import { createModel, createOptimizer } from '../../src/engine/index.ts';
import { acquireGpu } from '../../src/gpu/device.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import { RoundCounter, type Rounds } from '../../src/distributed/observe/timeline.ts';
import { requireNetns } from '../support/workers.ts';

const CHECK_EVERY = 4;
const STEPS = 12;
const BATCH = 16;

let gpu: Gpu;
let digits: Awaited<ReturnType<typeof loadMnist>>;
const servers: RunningServer[] = [];
const sessions: Session[] = [];

beforeAll(async () => {
  gpu = await acquireGpu();
  const all = await loadMnist();
  // The evaluation at the end reads every test example: 200 are plenty here.
  digits = {
    ...all,
    test: selectExamples(
      all.test,
      Uint32Array.from({ length: 200 }, (_, i) => i),
    ),
  };
  // Every kernel compiled once before any ring forms: the ranks share this process, and a compile that
  // holds its event loop inside a ring would stall them all.
  const warm = modelFor({
    model: 'mlp',
    optimizer: 'sgd',
    epochs: 1,
    batch: BATCH,
    lr: 0.05,
    momentum: 0.9,
    weightDecay: 0,
    seed: 1,
  });
  const batch = selectExamples(
    digits.train,
    Uint32Array.from({ length: BATCH }, (_, i) => i),
  );
  await warm.model.forwardBackward(batch.inputs, batch.labels);
  warm.optimizer.step();
  await warm.model.evaluate(digits.test.inputs, digits.test.labels);
  await warm.optimizer.exportState();
  warm.optimizer.destroy();
  warm.model.destroy();
});
// Each job's peers and server go when its test ends: their links and heartbeats would load the next one's.
afterEach(async () => {
  for (const s of sessions.splice(0)) await s.close('done').catch(() => {});
  for (const s of servers.splice(0)) await s.close();
});
afterAll(() => gpu?.destroy());

type Naming = Extract<RingEvent, { type: 'state-differs' | 'peer-misbehaved' }>;

interface PeerRun {
  name: string;
  /** Its rank in the first ring: the server ranks peers in the order their hellos arrive, which the test does not fix. */
  rank: number;
  result?: DistributedTrainResult;
  error?: RingtrainError;
  events: Naming[];
  /** This rank's collectives in each step, as `run --json` counts them, by the step (1-based) they ended with. */
  rounds: Map<number, Rounds>;
}

/**
 * One job of `size` peers ('peer0'…); the peer named `victim` gets other weights after each
 * of the steps in `perturbAt` (1-based, as onStep counts: after that many steps).
 */
async function runJob(
  id: string,
  size: number,
  hyperparameters: Record<string, number | boolean>,
  victim: string,
  perturbAt: number[],
): Promise<PeerRun[]> {
  requireNetns();
  const job = {
    id,
    token: `${id}-token`,
    config: {
      model: 'mlp',
      optimizer: 'sgd',
      hyperparameters: {
        lr: 0.05,
        seed: 5,
        steps: STEPS,
        stateCheckEvery: CHECK_EVERY,
        // The machine is shared and loaded: a slow rank is not what this test is about.
        timeoutMs: 120_000,
        ...hyperparameters,
      },
      batchPerPeer: BATCH,
      minPeers: 2,
      startPeers: size,
      maxPeers: size,
    },
  };
  const server = await startServer({ jobs: [job], staticDir: null });
  servers.push(server);
  const names = Array.from({ length: size }, (_, i) => `peer${i}`);
  const joined = await Promise.all(
    names.map((name) => init({ server: server.url, job: id, token: job.token, name, onNotice: () => {} })),
  );
  sessions.push(...joined);
  const models = joined.map((s) => modelFor(trainConfigFromJob(s.job.config)));
  return Promise.all(
    joined.map((session, i) => train(session, names[i], models[i], names[i] === victim ? perturbAt : [])),
  );
}

/** The model and optimizer the trainer would make for `config`, made here so that the test holds the model. */
function modelFor(config: DistributedTrainConfig): PreparedTraining {
  const model = createModel(gpu, modelSpecFor(config, digits.train));
  const { optimizer: kind, lr, momentum, weightDecay } = config;
  return { model, optimizer: createOptimizer(model, { kind, lr, momentum, weightDecay }) };
}

async function train(
  session: Session,
  name: string,
  prepared: PreparedTraining,
  perturbAt: number[],
): Promise<PeerRun> {
  const run: PeerRun = { name, rank: session.rank, events: [], rounds: new Map() };
  const counter = new RoundCounter();
  session.events.on((e) => {
    if (e.type === 'state-differs' || e.type === 'peer-misbehaved') run.events.push(e);
    if (e.rank !== run.rank) return;
    if (e.type === 'train-step') run.rounds.set(e.step, counter.step());
    else counter.record(e);
  });
  // Weights no honest step leads to: what a drifted replica holds.
  const other = Float32Array.from({ length: prepared.model.flatLength }, (_, i) => 0.05 * Math.sin(i * 0.37));
  try {
    run.result = await trainAsPeer(session, {
      gpu,
      train: digits.train,
      test: digits.test,
      bus: session.events,
      prepared,
      onStep: (s) => {
        if (perturbAt.includes(s.step)) prepared.model.writeParams(other);
      },
    });
  } catch (err) {
    run.error = err as RingtrainError;
  }
  return run;
}

const hashes = (runs: PeerRun[]) => runs.map((r) => r.result?.weightsHash);

describe('agreement on state', () => {
  it('names a perturbed peer within stateCheckEvery steps, resyncs it, and ends with one weightsHash', async () => {
    const runs = await runJob('perturbed-once', 3, {}, 'peer2', [2]);
    for (const r of runs) {
      expect(r.error, r.name).toBeUndefined();
      expect(r.result!.stoppedBy?.message, r.name).toBeUndefined();
      expect(r.result).toMatchObject({ steps: STEPS, size: 3 });
      // Every rank names it, at the first check after the perturbation.
      expect(r.events).toMatchObject([{ type: 'state-differs', peer: runs[2].rank, step: CHECK_EVERY }]);
      // The digests read after steps 4 and 8 are gathered beside the next step's allreduce, and only there;
      // that step waits for as many rounds as the plain step two before it (the one between resyncs, after 5).
      const gathered = [...r.rounds].filter(([, x]) => x.byName['state-hash']).map(([step]) => step);
      expect(gathered, r.name).toEqual([CHECK_EVERY + 1, 2 * CHECK_EVERY + 1]);
      for (const step of gathered)
        expect(r.rounds.get(step)!.sequential, `${r.name}, step ${step}`).toBe(r.rounds.get(step - 2)!.sequential);
    }
    expect(hashes(runs)[0]).toMatch(/^[0-9a-f]{64}$/);
    expect(new Set(hashes(runs)).size).toBe(1);
  }, 240_000);

  it('without the checks the same perturbation ends with two states', async () => {
    const runs = await runJob('unchecked', 3, { stateCheckEvery: 0 }, 'peer2', [2]);
    for (const r of runs) expect(r.events).toEqual([]);
    const [a, b, victim] = hashes(runs);
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(b).toBe(a);
    expect(victim).not.toBe(a);
  }, 240_000);

  it('reports a peer that differs again after its resync; the server ejects it and the others end with one weightsHash', async () => {
    const runs = await runJob('perturbed-twice', 3, { elastic: true }, 'peer2', [2, 6]);
    const [honest0, honest1, victim] = runs;
    for (const r of [honest0, honest1]) {
      expect(r.error, r.name).toBeUndefined();
      expect(r.result!.stoppedBy?.message, r.name).toBeUndefined();
      expect(r.result).toMatchObject({ steps: STEPS, size: 2 });
      expect(r.events.map((e) => [e.type, e.peer])).toEqual([
        ['state-differs', victim.rank],
        ['peer-misbehaved', victim.rank],
      ]);
    }
    expect(honest0.result!.weightsHash).toBe(honest1.result!.weightsHash);
    // The victim left the ring: it did not finish the steps the others did.
    expect(victim.result?.steps ?? 0).toBeLessThan(STEPS);
  }, 240_000);

  it('stops two peers that differ with ERR_STATE_MISMATCH, naming nobody', async () => {
    const runs = await runJob('two-differ', 2, {}, 'peer1', [2]);
    for (const r of runs) {
      expect(r.error, r.name).toMatchObject({ code: ErrorCode.StateMismatch, detail: { step: CHECK_EVERY } });
      expect(r.events).toEqual([]);
    }
  }, 240_000);
});

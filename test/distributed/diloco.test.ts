/**
 * Local SGD / DiLoCo's arithmetic on the memory transport, with a CPU model
 * (each rank's loss a quadratic ½·a_r·|p − t_r|², its gradient exact) and
 * CPU SGD: the real ring, the real LocalSgdOptimizer and DistributedOptimizer,
 * checked against a float64 oracle of the same rounds. The GPU model trains
 * this way in diloco-run.ts and over WebRTC in test/launcher/wan.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import type { Communicator } from '../../src/comm/communicator.ts';
import { ErrorCode } from '../../src/core/errors.ts';
import { LocalSgdOptimizer, localSgdSettings, ringOptimizer } from '../../src/distributed/train/diloco.ts';
import { DistributedOptimizer } from '../../src/distributed/api/optimizer.ts';
import type { Model } from '../../src/engine/model.ts';
import type { Optimizer } from '../../src/engine/optimizer.ts';

const N_PARAMS = 37;

/** Rank r's quadratic: curvature and target differ per rank, as data shards do. */
function problem(rank: number) {
  const a = 0.5 + 0.25 * rank;
  const t = Float64Array.from({ length: N_PARAMS }, (_, i) => Math.sin(i + 3 * rank) * (1 + rank));
  return { a, t };
}

/** A Model over CPU arrays: what LocalSgdOptimizer and DistributedOptimizer use of one. */
class QuadraticModel {
  params: Float32Array;
  grads = new Float32Array(N_PARAMS);
  readonly flatLength = N_PARAMS;
  readonly layout = [{ name: 'p', shape: [N_PARAMS], offset: 0, length: N_PARAMS }];
  constructor(
    readonly rank: number,
    start: Float32Array,
  ) {
    this.params = start.slice();
  }
  /** The gradient of this rank's loss at the current weights. */
  backward(): void {
    const { a, t } = problem(this.rank);
    for (let i = 0; i < N_PARAMS; i++) this.grads[i] = a * (this.params[i] - t[i]);
  }
  async readParams() {
    return this.params.slice();
  }
  async readGrads() {
    return this.grads.slice();
  }
  writeParams(v: Float32Array) {
    this.params.set(v);
  }
  writeGrads(v: Float32Array) {
    this.grads.set(v);
  }
}

/** Plain SGD (no momentum) on the CPU model. */
function sgd(model: QuadraticModel, lr: number): Optimizer {
  let steps = 0;
  return {
    kind: 'sgd',
    spec: { kind: 'sgd', lr, momentum: 0, weightDecay: 0, betas: [0.9, 0.999], eps: 1e-8 },
    get stepCount() {
      return steps;
    },
    step(l?: number) {
      const rate = l ?? lr;
      for (let i = 0; i < N_PARAMS; i++) model.params[i] -= rate * model.grads[i];
      steps++;
    },
    async exportState() {
      return { step: new Float32Array([steps]) };
    },
    importState(s: Record<string, Float32Array>) {
      steps = s.step[0];
    },
    destroy() {},
  };
}

const START = Float32Array.from({ length: N_PARAMS }, (_, i) => Math.cos(i) * 2);

type Ring = { comm: Communicator; model: QuadraticModel; opt: DistributedOptimizer | LocalSgdOptimizer }[];

function ring(
  size: number,
  make: (comm: Communicator, model: QuadraticModel, inner: Optimizer) => DistributedOptimizer | LocalSgdOptimizer,
  lr = 0.1,
): Ring {
  return createMemoryRing(size).map((comm, r) => {
    const model = new QuadraticModel(r, START);
    return { comm, model, opt: make(comm, model, sgd(model, lr)) };
  });
}

async function trainRing(peers: Ring, steps: number, lr = 0.1): Promise<number> {
  let bytes = 0;
  for (let s = 0; s < steps; s++) {
    const results = await Promise.all(
      peers.map((p) => {
        p.model.backward();
        return p.opt.step(lr);
      }),
    );
    bytes += results[0].bytesSent;
  }
  return bytes;
}

const asModel = (m: QuadraticModel) => m as unknown as Model;
const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) =>
  Array.from(a).reduce((w, v, i) => Math.max(w, Math.abs(v - b[i])), 0);

describe('local SGD / DiLoCo (memory transport, CPU model)', () => {
  it('H=1, outer lr 1, no outer momentum is synchronous SGD (to float32 rounding)', async () => {
    const sync = ring(3, (c, m, o) => new DistributedOptimizer(c, asModel(m), o));
    const local = ring(
      3,
      (c, m, o) => new LocalSgdOptimizer(c, asModel(m), o, { syncEvery: 1, outerLr: 1, outerMomentum: 0 }),
    );
    await trainRing(sync, 25);
    await trainRing(local, 25);
    // The weights moved…
    expect(maxDiff(sync[0].model.params, START)).toBeGreaterThan(0.5);
    // …the same way, and every local replica equals every other.
    for (const p of local) expect(maxDiff(p.model.params, sync[0].model.params)).toBeLessThan(1e-5);
    for (const p of local.slice(1)) expect(Array.from(p.model.params)).toEqual(Array.from(local[0].model.params));
    [...sync, ...local].forEach((p) => p.comm.close());
  });

  it('H=4 with Nesterov outer momentum follows a float64 oracle of the rounds, and sends once per H steps', async () => {
    const H = 4;
    const [lr, outerLr, mu] = [0.1, 0.7, 0.9];
    const size = 2;
    const peers = ring(
      size,
      (c, m, o) => new LocalSgdOptimizer(c, asModel(m), o, { syncEvery: H, outerLr, outerMomentum: mu }),
      lr,
    );
    const rounds = 6;
    const bytes = [];
    for (let k = 0; k < rounds; k++) bytes.push(await trainRing(peers, H, lr));
    // The oracle: each rank runs H inner SGD steps from the anchor; the outer step is Nesterov SGD on the mean delta.
    const anchor = Float64Array.from(START);
    const m = new Float64Array(N_PARAMS);
    for (let k = 0; k < rounds; k++) {
      const delta = new Float64Array(N_PARAMS);
      for (let r = 0; r < size; r++) {
        const { a, t } = problem(r);
        const p = Float64Array.from(anchor);
        for (let s = 0; s < H; s++) for (let i = 0; i < N_PARAMS; i++) p[i] -= lr * a * (p[i] - t[i]);
        for (let i = 0; i < N_PARAMS; i++) delta[i] += (anchor[i] - p[i]) / size;
      }
      for (let i = 0; i < N_PARAMS; i++) {
        m[i] = mu * m[i] + delta[i];
        anchor[i] -= outerLr * (delta[i] + mu * m[i]);
      }
    }
    for (const p of peers) expect(maxDiff(p.model.params, anchor)).toBeLessThan(1e-4);
    expect(maxDiff(anchor, START)).toBeGreaterThan(0.5);
    // One parameter-sized allreduce per round: N=2 sends the whole vector once (2(N-1)/N of it), plus negotiation.
    for (const b of bytes) expect(b).toBeGreaterThanOrEqual(N_PARAMS * 4);
    peers.forEach((p) => p.comm.close());
  });

  it('int8 deltas with error feedback reach the same optimum as float32 deltas', async () => {
    const run = async (compression: 'none' | 'int8') => {
      const peers = ring(
        3,
        (c, m, o) =>
          new LocalSgdOptimizer(c, asModel(m), o, { syncEvery: 5, outerLr: 0.7, outerMomentum: 0.5, compression }),
      );
      await trainRing(peers, 400);
      for (const p of peers.slice(1)) expect(Array.from(p.model.params)).toEqual(Array.from(peers[0].model.params));
      peers.forEach((p) => p.comm.close());
      return peers[0].model.params;
    };
    const exact = await run('none');
    const int8 = await run('int8');
    // The optimum of the summed quadratics: Σ a_r t_r / Σ a_r (local SGD with plain SGD settles near it).
    const optimum = Array.from(
      { length: N_PARAMS },
      (_, i) =>
        [0, 1, 2].reduce((s, r) => s + problem(r).a * problem(r).t[i], 0) /
        [0, 1, 2].reduce((s, r) => s + problem(r).a, 0),
    );
    expect(maxDiff(exact, optimum)).toBeLessThan(0.35);
    expect(maxDiff(int8, exact)).toBeLessThan(0.02);
  });

  it('exports the outer state with the inner one, and a peer that imports it continues the same round', async () => {
    const peers = ring(
      2,
      (c, m, o) => new LocalSgdOptimizer(c, asModel(m), o, { syncEvery: 3, outerLr: 0.7, outerMomentum: 0.9 }),
    );
    await trainRing(peers, 7); // two rounds and one inner step of the third
    const opt0 = peers[0].opt as LocalSgdOptimizer;
    const state = await opt0.optimizer.exportState();
    expect(Object.keys(state).sort()).toEqual(['outer.anchor', 'outer.inner_steps', 'outer.momentum', 'step']);
    expect(state['outer.inner_steps'][0]).toBe(1);
    expect(state['outer.momentum'].some((v) => v !== 0)).toBe(true);
    // A joiner on rank 1's place: a fresh optimizer given rank 0's state (as the trainer's broadcast does) and rank 0's
    // weights.
    const joiner = new QuadraticModel(1, peers[0].model.params);
    const fresh = new LocalSgdOptimizer(peers[1].comm, asModel(joiner), sgd(joiner, 0.1), {
      syncEvery: 3,
      outerLr: 0.7,
      outerMomentum: 0.9,
    });
    fresh.optimizer.importState(state);
    expect(fresh.stepsThisRound).toBe(1);
    expect(Array.from((await fresh.optimizer.exportState())['outer.anchor'])).toEqual(
      Array.from(state['outer.anchor']),
    );
    // A synchronous run's state has no outer part: refused with what to do.
    expect(() => fresh.optimizer.importState({ step: new Float32Array([3]) })).toThrow(
      /cannot resume with --sync-every/,
    );
    peers.forEach((p) => p.comm.close());
  });

  it('refuses bad settings, naming the flag', () => {
    expect(() => localSgdSettings({ syncEvery: 0 })).toThrow(/--sync-every/);
    expect(() => localSgdSettings({ syncEvery: 2.5 })).toThrow(/--sync-every/);
    expect(() => localSgdSettings({ syncEvery: 2, outerLr: 0 })).toThrow(/--outer-lr/);
    expect(() => localSgdSettings({ syncEvery: 2, outerMomentum: 1 })).toThrow(/--outer-momentum/);
    const [comm] = createMemoryRing(1);
    const m = new QuadraticModel(0, START);
    expect(() => ringOptimizer(comm, asModel(m), sgd(m, 0.1), { syncEvery: 2, backwardPassesPerStep: 2 })).toThrow(
      expect.objectContaining({
        code: ErrorCode.InvalidArgument,
        message: expect.stringContaining('--backward-passes'),
      }),
    );
    comm.close();
  });
});

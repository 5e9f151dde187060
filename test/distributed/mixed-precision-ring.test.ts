/**
 * A ring's precisions (src/distributed/train/mixed-precision.ts), over memory links and without a GPU: a worker
 * asking for another precision than the job's, and ranks at different precisions, are refused before any step
 * unless the job lets peers mix them (job setting mixPrecisions), and the overflow
 * is agreed once a step, at its last backward pass, on every rank (an f32 rank of a mixed ring included).
 * The loss scaler is the real one over a stand-in for the GPU whose overflow flag each pass sets.
 */
import { describe, expect, it } from 'vitest';
import { broadcast } from '../../src/collectives/broadcast.ts';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import { LossScaler } from '../../src/engine/loss-scale.ts';
import type { Model } from '../../src/engine/model.ts';
import type { Gpu } from '../../src/gpu/gpu.ts';
import {
  peerPrecision,
  precisionsDiffer,
  RingOverflow,
  startCollectiveName,
  type RingPrecision,
} from '../../src/distributed/train/mixed-precision.ts';

/** What each rank's ring starts with: the training position, broadcast under its start name. */
async function start(precisions: RingPrecision[]): Promise<PromiseSettledResult<Int32Array>[]> {
  const comms = createMemoryRing(precisions.length);
  const settled = await Promise.allSettled(
    comms.map((comm, r) =>
      broadcast(comm, Int32Array.of(r, 2, 3), {
        root: 0,
        name: startCollectiveName('training-position', precisions[r]),
        timeoutMs: 5_000,
      }).catch((err: unknown) => {
        throw precisionsDiffer(err) ?? err;
      }),
    ),
  );
  comms.forEach((c) => c.close());
  return settled;
}

/** A model whose only part here is its loss scaler (f16-mixed), or none (f32); `overflowsAt`: the passes (from 1) whose flag is set. */
function rankModel(f16: boolean, overflowsAt: Set<number>): { model: Model; pass: () => void } {
  let pass = 0;
  const gpu = {
    storage: () => ({ destroy() {} }),
    write() {},
    readU32: async () => Uint32Array.of(overflowsAt.has(pass) ? 1 : 0),
  } as unknown as Gpu;
  const lossScaler = f16 ? new LossScaler(gpu, { initialScale: 1024 }) : undefined;
  return { model: { lossScaler } as unknown as Model, pass: () => void pass++ };
}

/** `passes` passes of `k` a step on every rank: what each rank's RingOverflow said after each. */
async function trainPasses(
  ranks: { f16: boolean; overflowsAt: number[] }[],
  k: number,
  passes: number,
  mixed: boolean,
) {
  const comms = createMemoryRing(ranks.length);
  const models = ranks.map((r) => rankModel(r.f16, new Set(r.overflowsAt)));
  const overflow = models.map((m) => new RingOverflow(m.model, mixed));
  const said = await Promise.all(
    comms.map(async (comm, r) => {
      const steps = [];
      for (let p = 1; p <= passes; p++) {
        models[r].pass();
        steps.push(await overflow[r].agree(comm, p % k === 0, 5_000));
      }
      return steps;
    }),
  );
  comms.forEach((c) => c.close());
  return { said, scalers: models.map((m) => m.model.lossScaler) };
}

describe("a ring's precisions", () => {
  it("gives a peer the job's precision, and its own only where the job lets peers mix them", () => {
    const f32Job = { precision: 'f32', mixPrecisions: false } as const;
    expect(peerPrecision('j1', f32Job, undefined)).toBe('f32');
    expect(peerPrecision('j1', f32Job, 'f32')).toBe('f32');
    expect(() => peerPrecision('j1', f32Job, 'f16-mixed')).toThrow(
      new RingtrainError(
        ErrorCode.InvalidArgument,
        'job j1 trains at precision f32 and lets no peer mix precisions, but this worker was started with --precision f16-mixed; ' +
          "drop --precision to train at the job's, or start the job letting peers mix them (run --mix-precisions, job setting mixPrecisions: true)",
        { precision: 'f16-mixed', jobPrecision: 'f32' },
      ),
    );
    expect(peerPrecision('j2', { precision: 'f16-mixed', mixPrecisions: true }, 'f32')).toBe('f32');
    expect(peerPrecision('j2', { precision: 'f16-mixed', mixPrecisions: true }, undefined)).toBe('f16-mixed');
  });

  it("refuses ranks at different precisions before any step, naming each rank's, unless the job lets them mix", async () => {
    const refused = await start([{ precision: 'f32' }, { precision: 'f16-mixed' }, {}]);
    for (const s of refused) {
      expect(s.status).toBe('rejected');
      const err = (s as PromiseRejectedResult).reason as RingtrainError;
      expect(err).toBeInstanceOf(RingtrainError);
      expect(err.code).toBe(ErrorCode.Mismatch);
      expect(err.message).toContain('rank 0 f32, rank 1 f16-mixed, rank 2 f32');
      expect(err.message).toContain('--mix-precisions');
    }
    const same = await start([{ precision: 'f16-mixed' }, { precision: 'f16-mixed' }]);
    expect(same.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled']);
    const mixed = await start([
      { precision: 'f32', mixPrecisions: true },
      { precision: 'f16-mixed', mixPrecisions: true },
    ]);
    expect(mixed.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled']);
    expect((mixed[1] as PromiseFulfilledResult<Int32Array>).value).toEqual(Int32Array.of(0, 2, 3));
  });

  it('skips a step once, at its last pass, when any pass of it overflowed on any rank', async () => {
    // Two passes a step; rank 1 overflows in pass 3 (its step's first) and rank 0 in pass 6 (a last pass).
    const ranks = [
      { f16: true, overflowsAt: [6] },
      { f16: true, overflowsAt: [3] },
    ];
    const { said, scalers } = await trainPasses(ranks, 2, 8, false);
    for (const r of said) {
      expect(r.map((s) => s?.skipped)).toEqual([false, false, false, true, false, true, false, false]);
      expect(r.map((s) => s?.lossScale)).toEqual([1024, 1024, 1024, 1024, 512, 512, 256, 256]);
    }
    expect(scalers.map((s) => s?.skipped)).toEqual([2, 2]);
  });

  it('in a mixed ring an f32 rank (S = 1) joins the overflow sum and skips what the f16-mixed rank skips', async () => {
    const ranks = [
      { f16: false, overflowsAt: [] },
      { f16: true, overflowsAt: [1] },
    ];
    const { said } = await trainPasses(ranks, 1, 3, true);
    expect(said[0]).toEqual([1, 1, 1].map((lossScale, i) => ({ lossScale, skipped: i === 0 })));
    expect(said[1]).toEqual([1024, 512, 512].map((lossScale, i) => ({ lossScale, skipped: i === 0 })));
    // Without mixing an f32 rank agrees on nothing (no collective): f32 rings pay nothing for f16-mixed.
    const alone = await trainPasses([{ f16: false, overflowsAt: [] }], 1, 2, false);
    expect(alone.said[0]).toEqual([undefined, undefined]);
  });
});

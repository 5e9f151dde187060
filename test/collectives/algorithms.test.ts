/**
 * The allreduce algorithm registry (src/collectives/algorithms/): the list 'auto' walks, the wire
 * phases it hands out, 'auto' choosing as the if-chain it replaced did at every size, and every
 * registered algorithm reducing correctly over a memory ring, so that a new algorithm's file is
 * checked here as soon as it exists.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ALGORITHMS_INDEX, renderAlgorithmsIndex } from '../../scripts/gen-ops-index.mjs';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { allreduce, autoAlgorithm, chooseAlgorithm, reduceSettings } from '../../src/collectives/allreduce.ts';
import {
  allreduceAlgorithms,
  defineAllreduceAlgorithm,
  phaseOf,
  RING,
} from '../../src/collectives/algorithms/index.ts';
import { FAST_STEP_BIT } from '../../src/collectives/controller/negotiate.ts';
import {
  PHASE_ALLGATHER,
  PHASE_ALLTOALL,
  PHASE_BROADCAST,
  PHASE_REDUCE_SCATTER,
} from '../../src/collectives/transfer/ring.ts';

/** What 'auto' chose before the registry (allreduce.ts's if-chain), the reference for every size. */
function formerAuto(bytes: number, size: number, small: number, medium: number): string {
  if (size <= 1) return 'ring';
  if (bytes <= small) return 'recursive-doubling';
  if (bytes > medium || size <= 2) return 'ring';
  if ((size & (size - 1)) === 0) return 'halving-doubling';
  return size <= 8 ? 'two-shot' : 'ring';
}

describe('the allreduce algorithm registry', () => {
  it("holds the five algorithms in the order 'auto' walks them, the ring last", () => {
    expect(allreduceAlgorithms().map((a) => a.name)).toEqual([
      'recursive-doubling',
      'halving-doubling',
      'two-shot',
      'hierarchical',
      'ring',
    ]);
    expect(allreduceAlgorithms().at(-1)).toBe(RING);
  });

  it('gives each algorithm its own wire phase, apart from the fixed ones and below the fast-path bit', () => {
    const phases = allreduceAlgorithms().map(phaseOf);
    const fixed = [PHASE_REDUCE_SCATTER, PHASE_ALLGATHER, PHASE_BROADCAST, PHASE_ALLTOALL];
    expect(new Set([...phases, ...fixed]).size).toBe(phases.length + fixed.length);
    for (const p of phases) expect((p << 16) & FAST_STEP_BIT).toBe(0);
    // The numbers the algorithms had by hand before, so the wire is unchanged.
    expect(phases.slice(0, 3)).toEqual([5, 6, 7]);
  });

  it('the generated barrel src/collectives/algorithms/index.ts is up to date with the files', () => {
    expect(
      readFileSync(ALGORITHMS_INDEX, 'utf8') === renderAlgorithmsIndex(),
      'src/collectives/algorithms/index.ts is generated and stale; run `node scripts/gen-ops-index.mjs`',
    ).toBe(true);
  });

  it("'auto' chooses as the if-chain it replaced, for every size from 1 to 20 ranks and bytes around each threshold", () => {
    const [small, medium] = [1024, 16384];
    const sizes = [0, 4, small - 4, small, small + 4, medium - 4, medium, medium + 4, 1 << 20];
    let checked = 0;
    for (let ranks = 1; ranks <= 20; ranks++)
      for (const bytes of sizes)
        for (const [s, m] of [
          [small, medium],
          [medium, small],
        ]) {
          expect(autoAlgorithm(bytes, ranks, s, m), `${bytes} bytes, ${ranks} ranks`).toBe(
            formerAuto(bytes, ranks, s, m),
          );
          checked++;
        }
    expect(checked).toBe(20 * sizes.length * 2);
  });

  it('a reduction that needs the ring path (error feedback, int8, top-k, observed) goes round the ring at any size', () => {
    const t = new Float32Array(16);
    const choose = (o: object) => chooseAlgorithm(reduceSettings(t, { smallBytes: 1024, ...o }, 'test'), 64, 4);
    expect(choose({})).toBe('recursive-doubling');
    expect(choose({ compression: 'fp16' })).toBe('recursive-doubling');
    expect(choose({ compression: 'int8' })).toBe('ring');
    expect(choose({ compression: 'topk:0.5' })).toBe('ring');
    expect(choose({ compression: 'fp16', errorFeedback: new Float32Array(16) })).toBe('ring');
    expect(choose({ observeReceived: () => {} })).toBe('ring');
    expect(() => choose({ compression: 'int8', algorithm: 'two-shot' })).toThrow(
      /run on the ring only; use algorithm 'ring' or 'auto'/,
    );
    expect(() => choose({ algorithm: 'butterfly' })).toThrow(
      /unknown algorithm 'butterfly'; use one of auto, recursive-doubling, halving-doubling, two-shot, hierarchical, ring/,
    );
  });

  it('refuses a second algorithm under a taken name or order, and one named auto', () => {
    const base = { enabled: () => false, run: RING.run, cost: RING.cost };
    expect(() => defineAllreduceAlgorithm({ ...base, name: 'ring', order: 5000 })).toThrow(
      /'ring' already has this name/,
    );
    expect(() => defineAllreduceAlgorithm({ ...base, name: 'mine', order: 10 })).toThrow(
      /'recursive-doubling' already has order 10/,
    );
    expect(() => defineAllreduceAlgorithm({ ...base, name: 'auto', order: 5001 })).toThrow(/'auto' is the choice/);
    expect(allreduceAlgorithms()).toHaveLength(5);
  });

  for (const algorithm of allreduceAlgorithms()) {
    it(`${algorithm.name}: costs nothing alone, and sums and averages exactly on 2 to 5 ranks (forced)`, async () => {
      expect(algorithm.cost(1, 1000, { alphaS: 1, betaSPerByte: 1 })).toEqual({ s: 0, bytesSent: 0, messages: 0 });
      const four = algorithm.cost(4, 1000, { alphaS: 0.001, betaSPerByte: 1e-8 });
      expect(four.s > 0 && four.bytesSent > 0 && four.messages > 0, JSON.stringify(four)).toBe(true);
      for (const size of [2, 3, 4, 5]) {
        const comms = createMemoryRing(size);
        for (const count of [0, 1, 7, 1000]) {
          // Small integers: every order of summing gives the same float32 bits.
          const inputs = comms.map((_, r) => Float32Array.from({ length: count }, (_, k) => ((r * 7 + k) % 13) - 6));
          const want = Float32Array.from({ length: count }, (_, k) => inputs.reduce((a, x) => a + x[k], 0));
          const input = (r: number) => inputs[r].slice();
          const reduce = (op: 'sum' | 'average') =>
            Promise.all(
              comms.map((c, r) => allreduce(c, input(r), { algorithm: algorithm.name, op, name: `${op} ${count}` })),
            );
          for (const g of await reduce('sum'))
            expect(Array.from(g), `${size} ranks, ${count} elements`).toEqual(Array.from(want));
          for (const g of await reduce('average'))
            g.forEach((v, k) => expect(v, `${size} ranks, element ${k}`).toBeCloseTo(want[k] / size, 6));
        }
      }
    });
  }
});

/**
 * The CPU half of micro-batching (src/engine/micro-batch.ts): how a step splits into passes, how
 * each pass is weighed, and what a trainer refuses. The GPU half (the accumulate kernel, and the
 * MLP and the transformer giving one pass's gradients) runs with the oracle cases under Node and
 * Deno: test/oracles/micro-batch-cases.ts.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import type { Model } from '../../src/engine/model.ts';
import { passesOf, passWeights, useMicroBatch } from '../../src/engine/micro-batch.ts';

function refusal(run: () => unknown): RingtrainError {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(RingtrainError);
    return err as RingtrainError;
  }
  throw new Error('expected a refusal');
}

describe('micro-batch', () => {
  it('splits a batch into equal passes, and refuses a micro-batch that does not divide it, naming both', () => {
    expect(passesOf(12, 4)).toBe(3);
    expect(passesOf(8, 8)).toBe(1);
    const err = refusal(() => passesOf(64, 24));
    expect(err.code).toBe(ErrorCode.InvalidArgument);
    expect(err.message).toContain('a micro-batch of 24 does not divide the batch of 64');
    expect(err.message).toContain('--micro-batch that divides --batch');
    expect(err.detail).toEqual({ batch: 64, microBatch: 24 });
    // Larger than the batch: no whole pass at all.
    expect(refusal(() => passesOf(4, 8)).message).toContain('does not divide the batch of 4');
  });

  it("weighs each pass by its share of the step's counted targets (-1 ignored); all ignored weighs 0, never NaN", () => {
    expect(Array.from(passWeights([1, 2, 3, 4, 5, 6], 3))).toEqual([1 / 3, 1 / 3, 1 / 3].map(Math.fround));
    // 1 counted in the first pass, 3 in the second: a quarter and three quarters.
    expect(Array.from(passWeights([-1, -1, -1, 4, -1, 6, 7, 8], 2))).toEqual([0.25, 0.75]);
    expect(Array.from(passWeights([-1, -1, 0, -1], 2))).toEqual([0, 1]);
    expect(Array.from(passWeights([-1, -1, -1, -1], 2))).toEqual([0, 0]);
  });

  it('tells a model its micro-batch, and refuses one that cannot split a step or a batch it does not divide', () => {
    const told: (number | undefined)[] = [];
    const model = { identity: { name: 'net', options: {} }, setMicroBatch: (m: number | undefined) => told.push(m) };
    useMicroBatch(model as unknown as Model, 4, 16);
    useMicroBatch(model as unknown as Model, undefined, 16);
    expect(told).toEqual([4]);
    expect(refusal(() => useMicroBatch(model as unknown as Model, 5, 16)).message).toContain('does not divide');
    expect(refusal(() => useMicroBatch(model as unknown as Model, 0, 16)).message).toContain('whole number >= 1');
    const fixed = { identity: { name: 'fixed', options: {} } } as unknown as Model;
    expect(refusal(() => useMicroBatch(fixed, 4, 16)).message).toContain('model fixed cannot split a step');
  });
});

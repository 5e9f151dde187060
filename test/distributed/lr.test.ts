import { describe, expect, it } from 'vitest';
import { learningRateAt } from '../../src/distributed/api/lr.ts';
import { ErrorCode } from '../../src/core/errors.ts';

describe('learning-rate scaling', () => {
  it('ramps linearly from the base rate to base × size over the warm-up', () => {
    const s = { baseLr: 0.1, size: 4, warmupSteps: 10 };
    expect(learningRateAt(s, 0)).toBeCloseTo(0.1);
    expect(learningRateAt(s, 5)).toBeCloseTo(0.25);
    expect(learningRateAt(s, 10)).toBeCloseTo(0.4);
    expect(learningRateAt(s, 1000)).toBeCloseTo(0.4);
  });

  it('can leave the rate unscaled', () => {
    expect(learningRateAt({ baseLr: 0.001, size: 8, scaleBySize: false }, 3)).toBeCloseTo(0.001);
  });

  it('rejects a non-positive rate with a code and a hint', () => {
    expect(() => learningRateAt({ baseLr: -1, size: 2 }, 0)).toThrowError(/positive/);
    let caught: unknown;
    try {
      learningRateAt({ baseLr: 0, size: 2 }, 0);
    } catch (e) {
      caught = e;
    }
    expect((caught as { code?: string } | undefined)?.code).toBe(ErrorCode.InvalidArgument);
    expect(() => learningRateAt({ baseLr: 0.1, size: 0 }, 0)).toThrowError(/size/);
  });

  it('anneals to zero along a cosine after the warm-up', () => {
    const s = { baseLr: 0.1, size: 1, warmupSteps: 10, decay: 'cosine' as const, totalSteps: 110 };
    expect(learningRateAt(s, 10)).toBeCloseTo(0.1);
    expect(learningRateAt(s, 60)).toBeCloseTo(0.05);
    expect(learningRateAt(s, 110)).toBeCloseTo(0);
    expect(learningRateAt(s, 500)).toBeCloseTo(0);
    expect(() => learningRateAt({ baseLr: 0.1, size: 1, decay: 'cosine' }, 3)).toThrowError(/total number of steps/);
  });

  it("warms up from zero like the words workload's PyTorch reference (LR·(s+1)/100, then cosine to 0 at the last step)", () => {
    const s = {
      baseLr: 3e-3,
      size: 1,
      warmupSteps: 100,
      warmupFrom: 'zero' as const,
      decay: 'cosine' as const,
      totalSteps: 1000,
    };
    const reference = (step: number) =>
      step < 100 ? (3e-3 * (step + 1)) / 100 : 3e-3 * 0.5 * (1 + Math.cos((Math.PI * (step - 100)) / 900));
    for (const step of [0, 1, 50, 99, 100, 101, 550, 999])
      expect(learningRateAt(s, step)).toBeCloseTo(reference(step), 15);
    expect(learningRateAt(s, 0)).toBeCloseTo(3e-5, 15);
    expect(learningRateAt({ ...s, warmupFrom: 'base' }, 0)).toBe(3e-3);
  });
});

/**
 * broadcastOptimizerState sends the step count first: a root that has taken no
 * step sends no moments (and no rank reads its own back), a rank that did step
 * takes the made state (zeros); a root that stepped gives every rank its state.
 */
import { describe, expect, it } from 'vitest';
import { createMemoryRing } from '../../src/comm/rings.ts';
import { broadcastOptimizerState } from '../../src/distributed/api/broadcast-state.ts';
import type { Optimizer } from '../../src/engine/optimizer.ts';

/** The parts of an optimizer the broadcast uses, over plain arrays, counting its read-backs. */
class ArrayOptimizer {
  readonly kind = 'adamw';
  reads = 0;
  constructor(
    public stepCount: number,
    public m: Float32Array,
    public v: Float32Array,
  ) {}

  async exportState(): Promise<Record<string, Float32Array>> {
    this.reads++;
    return { m: this.m.slice(), v: this.v.slice(), step: Float32Array.of(this.stepCount) };
  }

  importState(state: Record<string, Float32Array>): void {
    this.m = state.m.slice();
    this.v = state.v.slice();
    this.stepCount = state.step[0];
  }
}

const asOptimizer = (o: ArrayOptimizer) => o as unknown as Optimizer;
const zeros = () => new Float32Array(5);

describe('broadcastOptimizerState', () => {
  it('a root at step 0 sends no moments; a rank that stepped takes zeros', async () => {
    const comms = createMemoryRing(3);
    const opts = [
      new ArrayOptimizer(0, zeros(), zeros()),
      new ArrayOptimizer(0, zeros(), zeros()),
      new ArrayOptimizer(4, Float32Array.of(1, 2, 3, 4, 5), Float32Array.of(5, 4, 3, 2, 1)),
    ];
    await Promise.all(comms.map((c, r) => broadcastOptimizerState(c, asOptimizer(opts[r]))));
    expect(opts.map((o) => o.reads)).toEqual([0, 0, 1]);
    for (const o of opts) {
      expect(o.stepCount).toBe(0);
      expect(Array.from(o.m)).toEqual([0, 0, 0, 0, 0]);
      expect(Array.from(o.v)).toEqual([0, 0, 0, 0, 0]);
    }
    await Promise.all(comms.map((c) => c.close()));
  });

  it('a root that stepped gives every rank its moments and step count', async () => {
    const comms = createMemoryRing(3);
    const m = Float32Array.of(0.5, -1, 2, 1e-7, 3);
    const v = Float32Array.of(9, 8, 7, 6, 5);
    const opts = [
      new ArrayOptimizer(0, zeros(), zeros()),
      new ArrayOptimizer(7, m, v),
      new ArrayOptimizer(2, Float32Array.of(1, 1, 1, 1, 1), zeros()),
    ];
    await Promise.all(comms.map((c, r) => broadcastOptimizerState(c, asOptimizer(opts[r]), { root: 1 })));
    for (const o of opts) {
      expect(o.stepCount).toBe(7);
      expect(Array.from(o.m)).toEqual(Array.from(m));
      expect(Array.from(o.v)).toEqual(Array.from(v));
    }
    await Promise.all(comms.map((c) => c.close()));
  });
});

import { describe, expect, it } from 'vitest';
import { allRanksAgree, buildFrames, elementsSentPerRank } from '../../demo/src/teach/frames.ts';
import { recordTeachingRun, teachingInputs } from '../../demo/src/teach/record.ts';

describe('teaching mode runs the real ring allreduce over memory links', () => {
  for (const size of [2, 3, 4, 5, 8]) {
    it(`N=${size}: the replay ends where the collective ended, with the sum on every rank`, async () => {
      const rec = await recordTeachingRun(size, 7 + size);
      const sum = rec.inputs[0].map((_, i) => rec.inputs.reduce((s, v) => s + v[i], 0));
      for (const out of rec.outputs) expect(out).toEqual(sum);
      const frames = buildFrames(rec);
      expect(frames).toHaveLength(1 + 2 * (size - 1));
      const last = frames[frames.length - 1];
      expect(allRanksAgree(last)).toBe(true);
      expect(last.buffers[0]).toEqual(sum);
      // Every chunk on the wire carries its numbers.
      for (const f of frames.slice(1)) {
        expect(f.transfers).toHaveLength(size);
        for (const t of f.transfers) expect(t.values.length).toBeGreaterThan(0);
      }
      // Each rank sent 2(N-1)/N of its vector.
      const length = rec.inputs[0].length;
      for (const n of elementsSentPerRank(rec)) expect(n).toBe((2 * (size - 1) * length) / size);
    });
  }

  it('inputs are small whole numbers and depend on the seed', () => {
    const a = teachingInputs(4, 1);
    expect(a).toHaveLength(4);
    for (const v of a) for (const x of v) expect(Number.isInteger(x) && x >= 0 && x <= 9).toBe(true);
    expect(teachingInputs(4, 1)).toEqual(a);
    expect(teachingInputs(4, 2)).not.toEqual(a);
  });
});

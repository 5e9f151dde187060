/**
 * A user's own training loop on the public API (examples/train-loop.ts:
 * init, broadcastParameters, DistributedOptimizer, its own sharding), run as
 * Horovod's users run theirs: `ringtrain launch -np 2 script.ts`. Over real
 * WebRTC, 2 ranks at batch 16 end with the weights one process ends with at
 * batch 32 on the same digits; the same process at batch 16 does not, so the
 * comparison can tell. Runs inside the private network namespace.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeSafetensors } from '../../src/checkpoint/safetensors.ts';
import { ringtrain } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-train-loop-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const STEPS = 20;

async function launch(np: number, batch: number, name: string): Promise<{ weights: Record<string, Float32Array>; summary: Record<string, number> }> {
  const save = join(dir, `${name}.safetensors`);
  const run = await ringtrain(['launch', '-np', String(np), '--runtime', 'deno', 'examples/train-loop.ts', '--steps', String(STEPS), '--batch', String(batch), '--save', save]);
  expect(run.code, run.stderr.slice(-3000)).toBe(0);
  const line = run.stdout.split('\n').find((l) => l.startsWith('[rank 0] {'))!;
  const { tensors } = decodeSafetensors(readFileSync(save));
  return { weights: Object.fromEntries(Object.entries(tensors).map(([k, t]) => [k, Float32Array.from(t.data)])), summary: JSON.parse(line.slice(line.indexOf('{'))) as Record<string, number> };
}

/** Largest |a − b| over every tensor, relative to the largest |b|. */
function relativeDifference(a: Record<string, Float32Array>, b: Record<string, Float32Array>): number {
  expect(Object.keys(a).sort()).toEqual(Object.keys(b).sort());
  let diff = 0;
  let scale = 0;
  for (const k of Object.keys(b)) {
    b[k].forEach((v, i) => {
      diff = Math.max(diff, Math.abs(a[k][i] - v));
      scale = Math.max(scale, Math.abs(v));
    });
  }
  return diff / scale;
}

describe('examples/train-loop.ts under ringtrain launch', () => {
  it('2 ranks at batch 16 end where one process at batch 32 does', { timeout: 240_000 }, async () => {
    const [two, one, half] = await Promise.all([launch(2, 16, 'two'), launch(1, 32, 'one'), launch(1, 16, 'half')]);
    expect(two.summary).toMatchObject({ rank: 0, size: 2, steps: STEPS });
    expect(one.summary).toMatchObject({ rank: 0, size: 1, steps: STEPS });
    expect(two.summary.test_accuracy).toBeGreaterThan(0.5);
    expect(relativeDifference(two.weights, one.weights)).toBeLessThan(1e-4);
    expect(relativeDifference(half.weights, one.weights)).toBeGreaterThan(1e-3);
  });
});

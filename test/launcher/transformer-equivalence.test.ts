/**
 * The transformer over a real ring, as a user runs it: `ringtrain run -np 2
 * --model transformer` (a ws signaling server, two Deno workers, real WebRTC,
 * real kernels) at batch B per peer takes the same steps as `ringtrain train`
 * at batch 2B: with plain SGD the two end at the same weights.
 *
 * Why it can hold: both draw step t's 2B words from (seed, t), each peer
 * takes every other word, and each peer's gradient is weighed by its share of
 * the step's counted characters (a word's length varies, and each peer's loss
 * is a mean over its own characters), so the ring's average is the mean over
 * all 2B words that one peer computes.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ringtrain } from '../support/cli.ts';
import { decodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-transformer-eq-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const STEPS = 20;
const BATCH = 8;
// Plain SGD, the recipe's warm-up from zero (both sides), a small validation glance.
const SGD = [
  '--model',
  'transformer',
  '--optimizer',
  'sgd',
  '--momentum',
  '0',
  '--weight-decay',
  '0',
  '--lr-schedule',
  'constant',
  '--eval-limit',
  '64',
  '--json',
  '--runtime',
  'deno',
];

function weights(path: string): Float32Array {
  const c = decodeCheckpoint(readFileSync(path));
  return Float32Array.from(
    Object.keys(c.params)
      .sort()
      .flatMap((k) => Array.from(c.params[k].data)),
  );
}

/** Relative to each weight's own size, floored so weights near zero compare absolutely. */
function maxRelativeDifference(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return Infinity;
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]) / Math.max(Math.abs(b[i]), 1e-2));
  return worst;
}

describe('ringtrain run -np 2 --model transformer (real WebRTC)', () => {
  it(`at batch ${BATCH} per peer ends at the weights of one peer at batch ${2 * BATCH} after ${STEPS} steps`, async () => {
    const ring = join(dir, 'ring.safetensors');
    const single = join(dir, 'single.safetensors');
    const start = join(dir, 'start.safetensors');
    const [r, s, i] = await Promise.all([
      ringtrain([
        'run',
        '-np',
        '2',
        ...SGD,
        '--lr',
        '0.5',
        '--steps',
        String(STEPS),
        '--batch',
        String(BATCH),
        '--save',
        ring,
      ]),
      ringtrain([
        'train',
        ...SGD,
        '--lr',
        '0.5',
        '--steps',
        String(STEPS),
        '--batch',
        String(2 * BATCH),
        '--save',
        single,
      ]),
      // Where both started: one step at a vanishing rate.
      ringtrain(['train', ...SGD, '--lr', '1e-12', '--steps', '1', '--batch', String(2 * BATCH), '--save', start]),
    ]);
    for (const run of [r, s, i]) expect(run.code, run.stderr).toBe(0);
    const summary = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(summary).toMatchObject({ steps: STEPS, size: 2, model: 'transformer', batch: BATCH, ok: true });
    expect(summary.val_loss).toBeLessThan(Math.log(27)); // below a uniform guess over the 27 symbols
    expect(summary.tokens_per_s).toBeGreaterThan(0);
    const [ringW, singleW, startW] = [weights(ring), weights(single), weights(start)];
    // The weights moved (the comparison would pass vacuously on a model that never trains)…
    expect(maxRelativeDifference(singleW, startW)).toBeGreaterThan(0.05);
    // …and the ring's match the single big batch's.
    expect(maxRelativeDifference(ringW, singleW)).toBeLessThanOrEqual(1e-3);
    // Both evaluated the same words with the same weights.
    expect(summary.val_loss).toBeCloseTo(JSON.parse(s.stdout.trim().split('\n').pop()!).val_loss, 4);
  }, 400_000);
});

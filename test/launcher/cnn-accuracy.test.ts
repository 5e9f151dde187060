/**
 * `ringtrain run -np 4 --model cnn` trains over real WebRTC with the launcher as a user runs it,
 * with the CNN's default recipe (SGD with momentum, 8 digits per peer per step, 32 per ring step,
 * learning rate 0.05 annealed by a cosine over the run). Half an epoch here, 125 steps: 94.25% measured
 * (one epoch, 250 steps, reached 96.2%, with twice the training); the same 125 steps at a learning rate of 1e-7,
 * a ring that does not train, ended at 7.7%, far under the bar. The bar, 97% after
 * 3 epochs (750 steps), is `sh scripts/in-netns.sh npx tsx bench/cnn-accuracy.ts`: long training belongs
 * in benchmarks.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';

/** Half of the epoch of 8,000 digits at 32 a step: the cosine anneals over these steps. */
const STEPS = 125;
/** 2.25 points under the one measured run (94.25%). */
const BAR = 0.92;

describe('ringtrain run -np 4 --model cnn', () => {
  it(`reaches at least ${BAR * 100}% test accuracy after ${STEPS} steps (half an epoch) over real WebRTC`, async () => {
    if (process.env.RINGTRAIN_NETNS !== '1')
      throw new Error('run under npm test (scripts/in-netns.sh): WebRTC stays inside a private namespace');
    // No tuning flags: the CNN's recipe (recipes.ts) is what a user gets (32 examples a step, 8 per peer, cosine decay).
    const args = ['bin/ringtrain.js', 'run', '-np', '4', '--model', 'cnn', '--steps', String(STEPS), '--json'];
    const r = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('exit', (code) => resolve({ code, stdout, stderr }));
    });
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const result = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(result).toMatchObject({ size: 4, model: 'cnn', runtime: 'deno', ok: true, steps: STEPS });
    expect(result.test_accuracy).toBeGreaterThanOrEqual(BAR);
  }, 600_000);
});

/**
 * Our CNN against the same network written in TF.js ops (TF.js's own WebGPU
 * kernels: conv2d, Conv2DBackpropFilter, conv2dTranspose, MaxPoolGrad) under
 * Deno: one SGD-with-momentum step from the same weights on the same batch of
 * real digits must give the same loss and the same update (lr·gradient) for
 * every tensor. An independent implementation of the whole forward and
 * backward pass, so a wrong layout, padding, pooling or gradient in ours shows
 * up here. Runs bench/cnn-vs-tfjs.ts --epochs 0 (the one-step check alone).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const deno = fileURLToPath(new URL('../../node_modules/.bin/deno', import.meta.url));

interface Check {
  runtime: string;
  first_step_max_rel_diff: number;
  first_step_update_max_rel_diff: number;
  first_step_loss: { ours: number; tfjs: number };
}

function oneStep(args: string[]): Check {
  expect(existsSync(deno), `Deno is missing at ${deno}: run npm ci (the 'deno' devDependency ships the binary)`).toBe(
    true,
  );
  const run = spawnSync(deno, ['run', '-A', 'bench/cnn-vs-tfjs.ts', '--epochs', '0', ...args], {
    cwd: root,
    encoding: 'utf8',
    timeout: 120_000,
  });
  expect(run.status, `deno exited with ${run.status}: ${run.stderr.slice(-2000)}`).toBe(0);
  return JSON.parse(run.stdout.trim().split('\n').pop() ?? '') as Check;
}

describe('CNN vs TF.js (deno)', () => {
  it(
    'one step of ours and of TF.js from the same weights agree (default CNN, and one with a hidden layer)',
    { timeout: 240_000 },
    () => {
      for (const args of [
        ['--batch', '16'],
        ['--batch', '8', '--channels', '4,8', '--hidden', '16', '--lr', '0.1'],
      ]) {
        const check = oneStep(args);
        const what = `${args.join(' ')}: ${JSON.stringify(check)}`;
        expect(check.runtime, what).toBe('deno');
        expect(Math.abs(check.first_step_loss.ours - check.first_step_loss.tfjs), what).toBeLessThan(1e-5);
        // Measured ~2e-6 (the updates) and ~2e-7 (the weights): float32 sums in different orders.
        expect(check.first_step_update_max_rel_diff, what).toBeLessThan(1e-4);
        expect(check.first_step_max_rel_diff, what).toBeLessThan(1e-5);
      }
    },
  );
});

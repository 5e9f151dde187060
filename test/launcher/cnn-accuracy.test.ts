/**
 * The bar: `ringtrain run -np 4` trains the CNN to at least 97% on the
 * 2,000 held-out digits, over real WebRTC, with the launcher as a user runs it.
 * Recipe: SGD with momentum, 8 digits per peer per step (32 per ring step),
 * learning rate 0.05 annealed by a cosine over 3 epochs.
 */
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';

describe('ringtrain run -np 4 --model cnn', () => {
  it('reaches at least 97% test accuracy over real WebRTC', async () => {
    if (process.env.RINGTRAIN_NETNS !== '1')
      throw new Error('run under npm test (scripts/in-netns.sh): WebRTC stays inside a private namespace');
    // No tuning flags: the CNN's recipe (recipes.ts) is what a user gets (32 examples a step, 8 per peer, cosine decay).
    const args = ['bin/ringtrain.js', 'run', '-np', '4', '--model', 'cnn', '--epochs', '3', '--json'];
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
    expect(result).toMatchObject({ size: 4, model: 'cnn', runtime: 'deno', ok: true, steps: 750 });
    expect(result.test_accuracy).toBeGreaterThanOrEqual(0.97);
  }, 900_000);
});

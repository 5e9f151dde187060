/**
 * `ringtrain train --micro-batch M` as a user runs it: a few steps of a small transformer with each
 * step's batch split into passes give the losses and the weights of the same run unsplit (the
 * gradient is the same mean over the batch, summed on the GPU), and a micro-batch that does not
 * divide the batch is refused before any work, naming both.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { ringtrainIn, type CliRun } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-micro-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** About 2 KB of seeded text over a few words. */
function tinyText(): string {
  const words = ['the', 'cat', 'sat', 'on', 'a', 'mat.', 'dog', 'ran', 'far', 'home!'];
  let x = 11;
  const out: string[] = [];
  for (let i = 0; i < 400; i++) {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    out.push(words[x % words.length] + (i % 13 === 12 ? '\n' : ''));
  }
  return out.join(' ');
}

const RUN = ['--context', '16', '--layers', '1', '--width', '16', '--heads', '2', '--batch', '8', '--steps', '4'];
const ON = [...RUN, '--eval-limit', '16', '--runtime', 'deno', '--json'];

function resultOf(r: CliRun): Record<string, number> {
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout.trim().split('\n').pop()!);
}

function weights(path: string): Float32Array {
  const c = decodeCheckpoint(readFileSync(path), path);
  const names = Object.keys(c.params).sort();
  return Float32Array.from(names.flatMap((k) => Array.from(c.params[k].data)));
}

describe('train --micro-batch', () => {
  // Two spawned trainings on a software adapter, on cores shared with other jobs.
  it(
    '4 steps at batch 8 in passes of 2 end with the losses and weights of the unsplit run',
    { timeout: 240_000 },
    async () => {
      const text = join(dir, 'tiny.txt');
      writeFileSync(text, tinyText());
      const [whole, split] = [join(dir, 'whole.safetensors'), join(dir, 'split.safetensors')];
      const a = resultOf(await ringtrainIn(dir, ['train', '--text', text, ...ON, '--save', whole]));
      const b = resultOf(
        await ringtrainIn(dir, ['train', '--text', text, ...ON, '--micro-batch', '2', '--save', split]),
      );
      expect([a.micro_batch, b.micro_batch]).toEqual([null, 2]);
      expect(b.steps).toBe(4);
      // The mean of the 4 steps' losses, and the validation loss after them: every step's loss and update counts.
      expect(Math.abs(b.train_loss - a.train_loss)).toBeLessThan(1e-5);
      expect(Math.abs(b.val_loss - a.val_loss)).toBeLessThan(1e-5);
      const [wa, wb] = [weights(whole), weights(split)];
      expect(wb.length).toBe(wa.length);
      let worst = 0;
      for (let i = 0; i < wa.length; i++) worst = Math.max(worst, Math.abs(wb[i] - wa[i]));
      expect(worst).toBeLessThan(1e-5);
    },
  );

  it('refuses a micro-batch that does not divide the batch, naming both, before any data or GPU work', async () => {
    const r = await ringtrainIn(dir, [
      'train',
      '--batch',
      '8',
      '--steps',
      '1',
      '--micro-batch',
      '3',
      '--runtime',
      'node',
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('a micro-batch of 3 does not divide the batch of 8');
    expect(r.stderr).toContain('ERR_INVALID_ARGUMENT');
  });
});

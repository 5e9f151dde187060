/**
 * The WAN modes end to end, as a user runs them: `ringtrain run` with Deno
 * workers over real WebRTC (inside the test's namespace), once with int8
 * gradients (error feedback) and once with local SGD / DiLoCo plus int8.
 * Both must train; the bytes each rank sent show what the mode saves.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ringtrain } from '../support/cli.ts';
import { decodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-wan-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
/** MLP 784-128-10. */
const FLOATS = 101_770;

describe('ringtrain run over real WebRTC in the WAN modes', () => {
  it('-np 3 --compression int8 --ring-order rtt trains (on the ring ordered by measured round trips) and sends about a quarter of float32 gradients', async () => {
    const steps = 20;
    const r = await ringtrain([
      'run',
      '-np',
      '3',
      '--model',
      'mlp',
      '--steps',
      String(steps),
      '--batch',
      '32',
      '--compression',
      'int8',
      '--ring-order',
      'rtt',
      '--json',
    ]);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const result = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(result).toMatchObject({ steps, size: 3, ok: true });
    expect(result.test_accuracy).toBeGreaterThan(0.3); // chance is 0.1
    // allreduce_bytes sums the ranks. A 3-rank ring sends 4/3 of the gradient per rank per step; float32 is 4 bytes a
    // float.
    const f32 = 3 * steps * FLOATS * 4 * (4 / 3);
    expect(result.allreduce_bytes).toBeGreaterThan(0.2 * f32);
    expect(result.allreduce_bytes).toBeLessThan(0.3 * f32);
  }, 300_000);

  it('-np 2 --sync-every 4 --compression int8 (DiLoCo) trains, syncs once per 4 steps and checkpoints the outer state', async () => {
    const steps = 24;
    const save = join(dir, 'diloco.safetensors');
    const r = await ringtrain([
      'run',
      '-np',
      '2',
      '--model',
      'mlp',
      '--steps',
      String(steps),
      '--batch',
      '32',
      '--sync-every',
      '4',
      '--compression',
      'int8',
      '--save',
      save,
      '--json',
    ]);
    expect(r.code, r.stderr.slice(-3000)).toBe(0);
    const result = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(result).toMatchObject({ steps, size: 2, ok: true });
    expect(result.test_accuracy).toBeGreaterThan(0.3);
    // 6 rounds of one int8 parameter allreduce per rank (a 2-rank ring sends the vector once), summed over the 2 ranks:
    // 1/16 of what 24 synchronous float32 steps send.
    const rounds = steps / 4;
    expect(result.allreduce_bytes).toBeGreaterThan(2 * rounds * FLOATS * 0.9);
    expect(result.allreduce_bytes).toBeLessThan(2 * rounds * FLOATS * 1.3);
    const ckpt = decodeCheckpoint(readFileSync(save));
    expect(ckpt.step).toBe(steps);
    // The round was ended before saving: the weights are the anchor, and the outer momentum is there for a resume.
    // The anchor is in the flat layout (tensors in order, each start aligned): find each tensor in it, exactly.
    const anchor = ckpt.optimizerState['outer.anchor'];
    let at = 0;
    for (const [name, t] of Object.entries(ckpt.params)) {
      const same = (o: number) => t.data.every((v, i) => anchor[o + i] === v);
      let o = at;
      while (o < at + 64 && !same(o)) o++;
      expect(o, `${name} not found in the anchor`).toBeLessThan(at + 64);
      at = o + t.data.length;
    }
    expect(ckpt.optimizerState['outer.inner_steps'][0]).toBe(0);
    expect(ckpt.optimizerState['outer.momentum'].some((v) => v !== 0)).toBe(true);
  }, 300_000);
});

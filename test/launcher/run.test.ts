/**
 * The launcher end to end, as a user runs it: `ringtrain run -np 2` starts a
 * real ws signaling server and two Deno workers that train over TCP links
 * (inside the test's network namespace), and writes a Chrome-trace timeline
 * of both ranks.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ringtrain } from '../support/cli.ts';
import { decodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-run-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('ringtrain run -np 2 (Deno workers, TCP links)', () => {
  it('trains, reports one JSON line, saves a checkpoint and writes a timeline of both ranks', async () => {
    const timeline = join(dir, 'trace.json');
    const save = join(dir, 'run.safetensors');
    const r = await ringtrain([
      'run',
      '-np',
      '2',
      '--model',
      'mlp',
      '--steps',
      '12',
      '--batch',
      '32',
      '--json',
      '--timeline',
      timeline,
      '--save',
      save,
    ]);
    expect(r.code, r.stderr).toBe(0);
    const last = r.stdout.trim().split('\n').pop()!;
    const result = JSON.parse(last);
    expect(result).toMatchObject({ steps: 12, size: 2, runtime: 'deno', ok: true });
    expect(result.test_accuracy).toBeGreaterThan(0.3); // well above the 0.1 of chance after 12 steps
    // MLP 784-128-10 has 101,770 floats; a 2-rank ring sends each rank's gradient once per step.
    expect(result.allreduce_bytes).toBeGreaterThan(2 * 12 * 101_770 * 4 * 0.9);
    expect(result.samples_per_s).toBeGreaterThan(0);
    // Each rank's exposed allreduce (s per step it waited on the ring after its own compute), measured:
    // above 0 (the sum and the update take time), below the whole run's time; the top level is the longest.
    const exposed = (result.exposed_allreduce_by_rank as { rank: number; exposed_allreduce_s_per_step: number }[]).map(
      (r) => [r.rank, r.exposed_allreduce_s_per_step] as const,
    );
    expect(exposed.map(([rank]) => rank)).toEqual([0, 1]);
    for (const [rank, s] of exposed) {
      expect(s, `rank ${rank}`).toBeGreaterThan(0);
      expect(s, `rank ${rank}`).toBeLessThan(result.train_seconds);
    }
    expect(result.exposed_allreduce_s_per_step).toBe(Math.max(...exposed.map(([, s]) => s)));

    const ckpt = decodeCheckpoint(readFileSync(save));
    expect(ckpt.step).toBe(12);

    const trace = JSON.parse(readFileSync(timeline, 'utf8')) as {
      traceEvents: { name: string; ph: string; pid: number; cat?: string }[];
    };
    const pids = new Set(trace.traceEvents.filter((e) => e.ph !== 'M').map((e) => e.pid));
    expect([...pids].sort()).toEqual([0, 1]);
    for (const phase of ['reduce-scatter', 'allgather', 'negotiate', 'compute']) {
      expect(
        trace.traceEvents.some((e) => e.name === phase && e.ph === 'X'),
        phase,
      ).toBe(true);
    }
    expect(trace.traceEvents.some((e) => e.ph === 'i' && e.name.startsWith('send chunk'))).toBe(true);
  }, 300_000);

  it('refuses a bad -np with a message that names the flag', async () => {
    const r = await ringtrain(['run', '-np', '0', '--steps', '1']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/-np must be a whole number from 1/);
  });
});

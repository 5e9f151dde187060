/**
 * A user's own training loop on the public API (examples/train-loop.ts:
 * init, broadcastParameters, DistributedOptimizer, its own sharding), run as
 * Horovod's users run theirs: `ringtrain launch -np 2 script.ts`. Over real
 * WebRTC, 2 ranks at batch 16 end with the weights one process ends with at
 * batch 32 on the same digits; the same process at batch 16 does not, so the
 * comparison can tell. Under `launch --elastic` the same loop runs in
 * elastic.run: one of 3 workers is killed mid-run, and the other two re-form
 * the ring, carry on from their last commit and end with the same weights.
 * Runs inside the private network namespace.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeSafetensors } from '../../src/checkpoint/safetensors.ts';
import { forEachLine } from '../../src/core/lines.node.ts';
import { ringtrain } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-train-loop-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const STEPS = 20;

async function launch(
  np: number,
  batch: number,
  name: string,
): Promise<{ weights: Record<string, Float32Array>; summary: Record<string, number> }> {
  const save = join(dir, `${name}.safetensors`);
  const run = await ringtrain([
    'launch',
    '-np',
    String(np),
    '--runtime',
    'deno',
    'examples/train-loop.ts',
    '--steps',
    String(STEPS),
    '--batch',
    String(batch),
    '--save',
    save,
  ]);
  expect(run.code, run.stderr.slice(-3000)).toBe(0);
  const line = run.stdout.split('\n').find((l) => l.startsWith('[rank 0] {'))!;
  const { tensors } = decodeSafetensors(readFileSync(save));
  return {
    weights: Object.fromEntries(Object.entries(tensors).map(([k, t]) => [k, Float32Array.from(t.data)])),
    summary: JSON.parse(line.slice(line.indexOf('{'))) as Record<string, number>,
  };
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

  it(
    'under launch --elastic, loses one of 3 workers mid-run; the other two re-form and end with the same weights',
    { timeout: 240_000 },
    async () => {
      expect(process.env.RINGTRAIN_NETNS, 'run under scripts/in-netns.sh (npm test does)').toBe('1');
      const child = spawn(
        process.execPath,
        [
          'bin/ringtrain.js',
          'launch',
          '--elastic',
          '-np',
          '3',
          '--runtime',
          'deno',
          'examples/train-loop.ts',
          '--steps',
          '60',
          '--batch',
          '16',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      const lines: string[] = [];
      let stderr = '';
      // Rank 0 says when the ring of 3 has taken 10 steps: then the worker holding rank 1 dies.
      const tenSteps = new Promise<void>((resolve) => {
        forEachLine(child.stdout!, (line) => {
          lines.push(line);
          if (line === '[rank 0] step 10 on 3 peers') resolve();
        });
      });
      child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      const exit = new Promise<number | null>((resolve) => child.on('exit', resolve));
      try {
        await Promise.race([
          tenSteps,
          exit.then(() => Promise.reject(new Error(`launch ended before step 10: ${lines.join('\n')}\n${stderr}`))),
        ]);
        const holder = /^\[launch\] worker (\d) \(pid (\d+)\) is rank 1$/;
        const [, victim, pid] = lines.findLast((l) => holder.test(l))!.match(holder)!;
        process.kill(Number(pid), 'SIGKILL');
        expect(await exit, `${lines.slice(-20).join('\n')}\n${stderr}`).toBe(0);
        expect(stderr).toContain(`[launch] worker ${victim} (rank 1) ended by SIGKILL`);
        expect(stderr).toContain(
          `ringtrain: worker ${victim} (rank 1, exit 128) left the run early; 2 finished without them`,
        );
        const finals = lines
          .filter((l) => /^\[rank \d\] \{/.test(l))
          .map((l) => JSON.parse(l.slice(l.indexOf('{'))) as Record<string, number>);
        expect(finals.map((f) => f.rank).sort()).toEqual([0, 1]);
        for (const f of finals) expect(f).toMatchObject({ size: 2, steps: 60, regroups: 1 });
        expect(finals[0].weights_norm).toBe(finals[1].weights_norm);
        expect(finals.find((f) => f.rank === 0)!.test_accuracy).toBeGreaterThan(0.5);
      } finally {
        child.kill('SIGKILL');
      }
    },
  );
});

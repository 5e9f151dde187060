/**
 * An elastic TF.js job as a user runs it: `ringtrain launch --elastic -np 3
 * examples/tfjs-mnist-elastic.ts` (TF.js's CPU backend, the small conv net,
 * real ws server, real Node workers over real WebRTC inside the test's network
 * namespace). The worker holding rank 0 is SIGKILLed after its first epoch:
 * the other two re-form the ring, go back to their last commit, take the new
 * rank 0's state, finish every epoch with the same weights, and the launcher
 * exits 0 naming the worker that left. The merged --timeline names the new
 * membership, the lost peer and the TF.js collectives.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { forEachLine } from '../../src/core/lines.node.ts';
import type { TraceEvent } from '../../src/distributed/observe/timeline.ts';
import { killIfSame, processStartTime, requireNetns, until } from '../support/workers.ts';

const EPOCHS = 4;
const launchers: ChildProcess[] = [];
const workers: { pid: number; started: string | undefined }[] = [];
const dir = mkdtempSync(join(tmpdir(), 'ringtrain-tfjs-elastic-'));
afterAll(() => {
  for (const c of launchers) c.kill('SIGKILL');
  for (const w of workers) killIfSame(w);
  rmSync(dir, { recursive: true, force: true });
});

interface Final {
  rank: number;
  size: number;
  epochs: number;
  steps: number;
  regroups: number;
  testAccuracy: number;
  weights: string;
}

describe('ringtrain launch --elastic with a TF.js script', () => {
  it(
    'loses the worker holding rank 0 mid-run; the other two re-form, finish with equal weights, and the run exits 0',
    { timeout: 480_000 },
    async () => {
      requireNetns();
      const timeline = join(dir, 'trace.json');
      // 480 digits over 3 ranks at batch 16: 10 steps an epoch, then 15 at 2 ranks.
      const args = [
        'launch',
        '--elastic',
        '-np',
        '3',
        '--timeline',
        timeline,
        'examples/tfjs-mnist-elastic.ts',
        '--model',
        'small',
        '--epochs',
        String(EPOCHS),
        '--batch',
        '16',
        '--train-examples',
        '480',
        '--test-examples',
        '200',
        '--lr',
        '0.003',
      ];
      const child = spawn(process.execPath, ['bin/ringtrain.js', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
      launchers.push(child);
      const lines: string[] = [];
      let stderr = '';
      const pids = new Map<number, { pid: number; started: string | undefined }>();
      forEachLine(child.stdout!, (line) => {
        lines.push(line);
        const m = line.match(/^\[launch\] worker (\d+): pid (\d+)$/);
        if (m) {
          const w = { pid: Number(m[2]), started: processStartTime(Number(m[2])) };
          pids.set(Number(m[1]), w);
          workers.push(w);
        }
      });
      child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      const exit = new Promise<number | null>((resolve) => child.on('exit', resolve));
      const seen = () => `${lines.slice(-20).join('\n')}\n${stderr.slice(-2000)}`;

      // The launcher says which worker holds rank 0 (the join order decides) before any line of rank 0's.
      const firstEpoch = /^\[rank 0\] rank 0: epoch 1\/4 done on 3 peers/;
      await until(() => lines.some((l) => firstEpoch.test(l)), 'rank 0 to finish its first epoch', 300_000, seen);
      const holder = /^\[launch\] worker (\d) \(pid \d+\) is rank 0$/;
      const victim = Number(
        lines
          .slice(
            0,
            lines.findIndex((l) => firstEpoch.test(l)),
          )
          .findLast((l) => holder.test(l))!
          .match(holder)![1],
      );
      killIfSame(pids.get(victim)!);

      const code = await exit;
      expect(code, seen()).toBe(0);
      expect(stderr).toContain(`[launch] worker ${victim} (rank 0) ended by SIGKILL`);
      expect(stderr).toMatch(
        new RegExp(`worker ${victim} \\(rank 0, exit 128\\) left the run early; 2 finished without them`),
      );
      // Each survivor re-formed (the reset callback's line), on 2 peers.
      expect(
        lines.filter((l) => /\] rank [01]: the ring re-formed with 2 peers; resuming at epoch [12], step \d+/.test(l)),
        seen(),
      ).toHaveLength(2);

      const finals = lines
        .filter((l) => /^\[rank \d\] \{/.test(l))
        .map((l) => JSON.parse(l.slice(l.indexOf('{'))) as Final);
      expect(finals.map((f) => f.rank).sort(), seen()).toEqual([0, 1]);
      for (const f of finals) {
        expect(f).toMatchObject({ size: 2, epochs: EPOCHS });
        expect(f.regroups).toBeGreaterThanOrEqual(1);
        // At least the 10 steps of the first epoch at 3 ranks and 3 epochs of 15 at 2 after it.
        expect(f.steps).toBeGreaterThanOrEqual(10 + 3 * 15);
      }
      // The survivors hold the same model, bit for bit, and it learned (10 digits: chance is 0.1).
      expect(finals[0].weights).toBe(finals[1].weights);
      expect(finals[0].steps).toBe(finals[1].steps);
      expect(finals[0].testAccuracy).toBe(finals[1].testAccuracy);
      expect(finals[0].testAccuracy).toBeGreaterThan(0.5);

      // The timeline renders a TF.js job as any other: the lost peer, the ring of 2, the TF.js collectives.
      const trace = JSON.parse(readFileSync(timeline, 'utf8')) as { traceEvents: TraceEvent[] };
      const names = trace.traceEvents.map((e) => e.name);
      expect(
        names.some((n) => /^membership epoch \d+ \(size 2\)$/.test(n)),
        'a membership of 2',
      ).toBe(true);
      expect(
        names.some((n) => /^peer \d lost$/.test(n)),
        'a lost peer',
      ).toBe(true);
      expect(names).toContain('collective tfjs/elastic-position');
      expect(
        names.some((n) => n.startsWith('collective fused[tfjs/0')),
        'the averaged gradients',
      ).toBe(true);
    },
  );
});

/**
 * TF.js data-parallel equivalence as a user runs it: `ringtrain launch -np N`
 * (N = 2, 4) starts the signaling server and N Node processes
 * (test/tfjs/fit-peer.ts) that meet over real WebRTC and train with
 * model.fit, batch 16 each, plain SGD, 20 steps. Their final weights must
 * match one process at batch 16·N from rank 0's initial weights on the same
 * examples. Runs inside the private network namespace (scripts/in-netns.sh).
 */
import { spawn } from 'node:child_process';
import { beforeAll, describe, expect, it } from 'vitest';
import { forEachLine } from '../../src/core/lines.node.ts';
import { BATCH, LR, maxRelativeDifference, STEPS, trainSingle, useCpu } from './model.ts';

beforeAll(useCpu);

interface PeerReport {
  rank: number;
  size: number;
  lengths: number[];
  weights: string;
  history: Record<string, number[]>;
}

function launch(np: number): Promise<{ code: number | null; reports: PeerReport[]; stderr: string }> {
  const child = spawn(process.execPath, ['bin/ringtrain.js', 'launch', '-np', String(np), 'test/tfjs/fit-peer.ts'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const reports: PeerReport[] = [];
  let stderr = '';
  forEachLine(child.stdout!, (line) => {
    const json = line.replace(/^\[rank \d+\] /, '');
    if (json.startsWith('{')) reports.push(JSON.parse(json) as PeerReport);
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, reports, stderr })));
}

function split(r: PeerReport): Float32Array[] {
  const b = Buffer.from(r.weights, 'base64');
  const flat = new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  let o = 0;
  return r.lengths.map((n) => flat.slice(o, (o += n)));
}

describe('TF.js over real WebRTC: ringtrain launch -np N', () => {
  it('needs the private network namespace', () => {
    expect(process.env.RINGTRAIN_NETNS, 'run under scripts/in-netns.sh (npm test does)').toBe('1');
  });

  for (const np of [2, 4]) {
    it(
      `${np} processes at batch ${BATCH} (lr ${LR}, ${STEPS} steps) end where one process at batch ${np * BATCH} does`,
      { timeout: 240_000 },
      async () => {
        const [run, single] = await Promise.all([launch(np), trainSingle(1, np * BATCH * STEPS, np * BATCH)]);
        expect(run.code, run.stderr.slice(-3000)).toBe(0);
        expect(run.reports.map((r) => r.rank).sort()).toEqual([...Array(np).keys()]);
        expect(maxRelativeDifference(single.final, single.initial)).toBeGreaterThan(0.01);
        for (const r of run.reports) {
          expect(r.size).toBe(np);
          expect(maxRelativeDifference(split(r), single.final), `rank ${r.rank}`).toBeLessThanOrEqual(1e-4);
          expect(r.history, `rank ${r.rank}'s averaged metrics`).toEqual(run.reports[0].history);
        }
      },
    );
  }
});

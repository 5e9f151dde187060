/**
 * TF.js data-parallel equivalence as a user runs it: `ringtrain launch -np 2`
 * starts the signaling server and two Node processes (test/tfjs/fit-peer.ts)
 * that meet over real WebRTC and train with model.fit, batch 16 each, plain
 * SGD, 20 steps. Their final weights must match one process at batch 32 from
 * rank 0's initial weights on the same examples. Runs inside the private
 * network namespace (scripts/in-netns.sh).
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
  const child = spawn(process.execPath, ['bin/ringtrain.js', 'launch', '-np', String(np), 'test/tfjs/fit-peer.ts'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const reports: PeerReport[] = [];
  let stderr = '';
  forEachLine(child.stdout!, (line) => {
    const json = line.replace(/^\[\d+\] /, '');
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

describe('TF.js over real WebRTC: ringtrain launch -np 2', () => {
  it('needs the private network namespace', () => {
    expect(process.env.RINGTRAIN_NETNS, 'run under scripts/in-netns.sh (npm test does)').toBe('1');
  });

  it(`2 processes at batch ${BATCH} (lr ${LR}, ${STEPS} steps) end where one process at batch ${2 * BATCH} does`, async () => {
    const [run, single] = await Promise.all([launch(2), trainSingle(1, 2 * BATCH * STEPS, 2 * BATCH)]);
    expect(run.code, run.stderr.slice(-3000)).toBe(0);
    expect(run.reports.map((r) => r.rank).sort()).toEqual([0, 1]);
    expect(maxRelativeDifference(single.final, single.initial)).toBeGreaterThan(0.01);
    for (const r of run.reports) {
      expect(r.size).toBe(2);
      expect(maxRelativeDifference(split(r), single.final), `rank ${r.rank}`).toBeLessThanOrEqual(1e-4);
    }
    expect(run.reports[0].history).toEqual(run.reports[1].history);
  });
});

/**
 * The hierarchical allreduce over real WebRTC: a ring of 4 processes (Node and Deno) on this
 * machine, meeting through a FileStore (src/comm/launch.node.ts), each running
 * hierarchical-peer.ts. Runs inside the private network namespace (npm test wraps vitest in
 * scripts/in-netns.sh); outside it, it fails saying so.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { launchLocalRing, type LocalRing, type PeerRuntime } from '../../src/comm/launch.node.ts';

const SCRIPT = 'test/collectives/hierarchical-peer.ts';
let ring: LocalRing | null = null;
afterEach(() => {
  ring?.stop();
  ring = null;
});

type Report = {
  rank: number;
  runtime: string;
  ok: boolean;
  error?: string;
  sums: object;
  ran: Record<string, string[]>;
};

describe('hierarchical allreduce over real WebRTC, one process per rank', () => {
  it('needs the private network namespace', () => {
    expect(process.env.RINGTRAIN_NETNS, 'run under scripts/in-netns.sh (npm test does)').toBe('1');
  });

  it('4 peers (node+node+deno+node), 2 hosts: each rank the f64 sum to rounding, every rank the same bits', async () => {
    const runtimes: PeerRuntime[] = ['node', 'node', 'deno', 'node'];
    ring = launchLocalRing({ size: runtimes.length, script: SCRIPT, runtimes });
    const lines = await Promise.all(ring.peers.map((p) => p.waitFor((l) => l.startsWith('{') && l.includes('"ok"'))));
    const reports = lines.map((l) => JSON.parse(l) as Report);
    reports.forEach((r, i) => {
      expect(r.error, `rank ${i}`).toBeUndefined();
      expect(r.ok).toBe(true);
      expect(r.runtime).toBe(runtimes[i]);
      // 'auto' with groups chose it for the large tensor: no phase of the flat ring ran.
      expect(r.ran['auto with 2 per host, f32 sum']).toEqual(['negotiate', 'hierarchical']);
    });
    for (const r of reports) expect(r.sums).toEqual(reports[0].sums);
    expect(Object.keys(reports[0].sums)).toHaveLength(4);
  });
});

/**
 * Real WebRTC rings of separate processes (Node and Deno) on this machine,
 * meeting through a FileStore. Runs inside the private network namespace
 * (npm test wraps vitest in scripts/in-netns.sh); outside it, it fails saying so.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_FRAME_PAYLOAD } from '../../src/comm/frame.ts';
import { launchLocalRing, type LocalRing, type PeerRuntime } from '../../src/comm/launch.node.ts';
import { CASES } from '../collectives/horovod-cases.ts';

const SCRIPT = 'test/comm/ring-peer.ts';
let ring: LocalRing | null = null;
afterEach(() => {
  ring?.stop();
  ring = null;
});

type Report = { rank: number; runtime: string; ok: boolean; error?: string; [k: string]: unknown };

async function runRing(runtimes: PeerRuntime[], scenario: string): Promise<Report[]> {
  ring = launchLocalRing({ size: runtimes.length, script: SCRIPT, runtimes, args: () => ['--scenario', scenario] });
  const lines = await Promise.all(ring.peers.map((p) => p.waitFor((l) => l.startsWith('{') && l.includes('"ok"'))));
  return lines.map((l) => JSON.parse(l) as Report);
}

function expectAllGood(reports: Report[], runtimes: PeerRuntime[]): void {
  reports.forEach((r, i) => {
    expect(r.error, `rank ${i}`).toBeUndefined();
    expect(r.ok).toBe(true);
    expect(r.runtime).toBe(runtimes[i]);
  });
  // The stream of odd sizes arrived byte for byte; a released single-frame message was detached by
  // its link (every peer can free it: Deno always, Node 20 with the flag its launcher gives it), and a
  // glued one is not the link's.
  reports.forEach((r, i) => {
    expect(r.canFree, `rank ${i}`).toBe(true);
    const released = r.released as { bytes: number; emptyAfter: boolean }[];
    expect(released.length).toBe(12);
    for (const m of released)
      expect(m.emptyAfter, `rank ${i}, ${m.bytes} bytes`).toBe(r.canFree === true && m.bytes <= MAX_FRAME_PAYLOAD);
  });
  // Bitwise-equal results everywhere, each allreduce algorithm's among them.
  for (const r of reports) expect(r.sums).toEqual(reports[0].sums);
  expect(Object.keys(reports[0].sums as object)).toEqual(
    expect.arrayContaining(['recursive-doubling-fp16', 'halving-doubling-fp16', 'two-shot-fp16']),
  );
}

describe('collectives over real WebRTC, one process per rank', () => {
  it('needs the private network namespace', () => {
    expect(process.env.RINGTRAIN_NETNS, 'run under scripts/in-netns.sh (npm test does)').toBe('1');
  });

  for (const runtimes of [
    ['node', 'node'],
    ['node', 'node', 'node'],
    ['node', 'deno', 'node', 'deno'],
  ] as PeerRuntime[][]) {
    it(`every collective on ${runtimes.length} peers (${runtimes.join('+')})`, async () => {
      expectAllGood(await runRing(runtimes, 'check'), runtimes);
    });
  }

  it('the Horovod conformance cases pass on 3 peers (node+deno+node)', async () => {
    const reports = await runRing(['node', 'deno', 'node'], 'horovod');
    const expected = CASES.filter((c) => !c.breaksRing).map((c) => c.name);
    for (const r of reports) {
      expect(r.failed, `rank ${r.rank} (${r.runtime})`).toEqual({});
      expect(r.passed).toEqual(expected);
    }
  });

  it('mismatch and timeout fail on every rank with the same error; the ring goes on', async () => {
    const reports = await runRing(['node', 'deno', 'node'], 'failures');
    for (const r of reports) {
      const errors = r.errors as Record<string, { code: string; message: string; waitingFor?: number[] }>;
      expect(errors.mismatch.code).toBe('ERR_COLLECTIVE_MISMATCH');
      expect(errors.mismatch.message).toContain("rank 1 sent allreduce 'grad' float32[7]");
      expect(errors.timeout.code).toBe('ERR_COLLECTIVE_TIMEOUT');
      expect(errors.timeout.waitingFor).toEqual([2]);
      expect(r.after).toBe(0 + 1 + 2);
    }
  });

  it('a peer killed mid-allreduce fails every survivor with PeerLost naming it', async () => {
    ring = launchLocalRing({
      size: 4,
      script: SCRIPT,
      runtimes: ['node', 'node', 'deno', 'node'],
      args: () => ['--scenario', 'kill'],
    });
    await Promise.all(ring.peers.map((p) => p.waitFor((l) => l.includes('"ready"'))));
    // Once every rank has finished two allreduces (so the next is under way), kill rank 2 outright (no goodbye, no
    // close).
    await Promise.all(ring.peers.map((p) => p.waitFor((l) => l.includes('"looping"'))));
    ring.peers[2].child.kill('SIGKILL');
    const survivors = ring.peers.filter((p) => p.rank !== 2);
    const reports = (await Promise.all(survivors.map((p) => p.waitFor((l) => l.includes('"error"'))))).map(
      (l) => JSON.parse(l) as Report,
    );
    for (const r of reports) {
      expect(r.error, JSON.stringify(r)).toBe('ERR_PEER_LOST');
      expect(r.peer).toBe(2);
    }
  });
});

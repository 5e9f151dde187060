/**
 * Ejection by report (issue 14): a peer is put out of the job only when more
 * than half of the other peers, and at least two, report it; one peer's word
 * (which may be the liar's) ejects no one. Real ws server, raw WebSocket peers.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { RawPeer, jobSpec } from './helpers.ts';

describe('signaling server: report and ejection', () => {
  let server: RunningServer;
  const peers: (RawPeer & { peerId: string })[] = [];
  beforeEach(async () => {
    server = await startServer({ staticDir: null, jobs: [jobSpec('swarm', 'tok', 2, 4)] });
  });
  afterEach(async () => {
    for (const p of peers.splice(0)) p.close();
    await server.close();
  });
  const joinAll = async (names: string[]) => {
    for (const name of names) peers.push(await RawPeer.join(server.wsUrl, 'swarm', 'tok', name));
    await peers[0].membership(names.length);
    return peers;
  };

  it('ejects on a majority of the other peers, tells everyone why, and ignores self-reports and lone reports', async () => {
    const [a, b, c, d] = await joinAll(['a', 'b', 'c', 'd']);
    // d reports a alone, a reports itself: nothing happens (one of three others is no majority).
    d.sendJson({ type: 'report', peerId: a.peerId, reason: 'a lie' });
    a.sendJson({ type: 'report', peerId: a.peerId, reason: 'confession' });
    b.sendJson({ type: 'report', peerId: d.peerId, reason: 'garbage frames' });
    c.sendJson({ type: 'report', peerId: d.peerId, reason: 'garbage frames' });
    // b and c: two of d's three others.
    const err = await d.error('ejected');
    expect(err).toMatchObject({ fatal: true, message: expect.stringContaining('reported by 2 of the other 3 peers: garbage frames') });
    expect((await d.closed).code).toBe(4000);
    const left = await a.waitFor((m) => m.type === 'peer-left', 'peer-left');
    expect(left).toMatchObject({ peerId: d.peerId, rank: 3, reason: 'ejected', name: 'd' });
    const info = server.jobInfo('swarm')!;
    expect(info.peers.map((p) => p.name)).toEqual(['a', 'b', 'c']);
  });

  it('ejects no one in a job of two (one word against another)', async () => {
    const [a, b] = await joinAll(['a', 'b']);
    a.sendJson({ type: 'report', peerId: b.peerId, reason: 'flood' });
    // A later message is answered in order, so the report was handled by then.
    b.sendJson({ type: 'report', peerId: a.peerId, reason: 'flood' });
    a.sendJson({ type: 'progress', step: 1 });
    await expect.poll(() => server.jobInfo('swarm')!.peers[0].progress?.step).toBe(1);
    expect(server.jobInfo('swarm')!.size).toBe(2);
  });
});

/**
 * Ejection by report: a peer is put out of the job only when more than half
 * of the other voters, and at least two, report it; one peer's word (which
 * may be the liar's) ejects no one. A voter is a member that proved it trains
 * with the others (every member of an epoch attested it completed a step), so
 * sockets that join and never train neither outvote nor outnumber the peers
 * that do. Names are unique in a job; a job may cap its members per address.
 * Real ws server, raw WebSocket peers.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { RawPeer, jobSpec } from './helpers.ts';
import { joinMessage } from '../support/signing-key.ts';

describe('signaling server: report and ejection', () => {
  let server: RunningServer;
  const peers: (RawPeer & { peerId: string })[] = [];
  beforeEach(async () => {
    // Joiners are admitted at once (admitTimeoutMs 0): voting is the defence this file tests, for
    // members that joined and never trained. Staged admission, which keeps such sockets out of
    // the membership in the first place, is test/server/candidates.test.ts's.
    const spec = jobSpec('swarm', 'tok', 2, 6);
    spec.config.hyperparameters = { ...spec.config.hyperparameters, admitTimeoutMs: 0 };
    server = await startServer({ staticDir: null, jobs: [spec] });
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
  /** Every one of `who` says it completed a step on the ring of `epoch`; the last attestation makes them voters. */
  const attestAll = async (who: (RawPeer & { peerId: string })[], epoch: number) => {
    for (const p of who) p.sendJson({ type: 'attest', epoch });
    // Messages from one socket are handled in order: its progress lands after its attestation.
    who.at(-1)!.sendJson({ type: 'progress', step: 1 });
    await expect
      .poll(() => server.jobInfo('swarm')!.peers.find((p) => p.peerId === who.at(-1)!.peerId)?.progress?.step)
      .toBe(1);
  };

  it('ejects on a majority of the other peers, tells everyone why, and ignores lone reports', async () => {
    const [a, b, c, d] = await joinAll(['a', 'b', 'c', 'd']);
    await attestAll([a, b, c, d], 4);
    expect(server.jobInfo('swarm')!.peers.every((p) => p.voter)).toBe(true);
    // d reports a alone: nothing happens (one of three others is no majority).
    d.sendJson({ type: 'report', peerId: a.peerId, reason: 'a lie' });
    b.sendJson({ type: 'report', peerId: d.peerId, reason: 'garbage frames' });
    c.sendJson({ type: 'report', peerId: d.peerId, reason: 'garbage frames' });
    // b and c: two of d's three others.
    const err = await d.error('ejected');
    expect(err).toMatchObject({
      fatal: true,
      message: expect.stringContaining('reported by 2 of the other 3 voting peers: garbage frames'),
    });
    expect((await d.closed).code).toBe(4000);
    const left = await a.waitFor((m) => m.type === 'peer-left', 'peer-left');
    expect(left).toMatchObject({ peerId: d.peerId, rank: 3, reason: 'ejected', name: 'd' });
    const info = server.jobInfo('swarm')!;
    expect(info.peers.map((p) => p.name)).toEqual(['a', 'b', 'c']);
  });

  it('ejects a peer that reports itself at once, one word being enough: its own', async () => {
    const [a, b, c] = await joinAll(['a', 'b', 'c']);
    await attestAll([a, b, c], 3);
    c.sendJson({ type: 'report', peerId: c.peerId, reason: 'step 3: its gradient is not finite (norm NaN)' });
    expect(await c.error('ejected')).toMatchObject({
      fatal: true,
      message: expect.stringContaining('it reported itself: step 3: its gradient is not finite'),
    });
    expect(await a.waitFor((m) => m.type === 'peer-left', 'peer-left')).toMatchObject({
      peerId: c.peerId,
      reason: 'ejected',
      name: 'c',
    });
    expect(server.jobInfo('swarm')!.peers.map((p) => p.name)).toEqual(['a', 'b']);
  });

  it('ejects no one in a job of two (one word against another)', async () => {
    const [a, b] = await joinAll(['a', 'b']);
    await attestAll([a, b], 2);
    a.sendJson({ type: 'report', peerId: b.peerId, reason: 'flood' });
    // A later message is answered in order, so the report was handled by then.
    b.sendJson({ type: 'report', peerId: a.peerId, reason: 'flood' });
    a.sendJson({ type: 'progress', step: 1 });
    await expect.poll(() => server.jobInfo('swarm')!.peers[0].progress?.step).toBe(1);
    expect(server.jobInfo('swarm')!.size).toBe(2);
  });

  it('counts only voters: three sockets that never trained cannot eject a worker, and the workers eject them', async () => {
    const [a, b] = await joinAll(['a', 'b']);
    await attestAll([a, b], 2);
    const ghosts: (RawPeer & { peerId: string })[] = [];
    for (const name of ['g0', 'g1', 'g2']) ghosts.push(await RawPeer.join(server.wsUrl, 'swarm', 'tok', name));
    peers.push(...ghosts);
    await a.membership(5);
    // The ghosts attest an epoch whose ring a and b never completed (it needs the ghosts' data):
    // without a and b it is not every member, so nobody new votes.
    for (const g of ghosts) g.sendJson({ type: 'attest', epoch: 5 });
    for (const g of ghosts) g.sendJson({ type: 'report', peerId: a.peerId, reason: 'a lie' });
    await attestAll(ghosts, 5);
    const info = server.jobInfo('swarm')!;
    expect(info.size).toBe(5);
    expect(info.peers.map((p) => [p.name, p.voter])).toEqual([
      ['a', true],
      ['b', true],
      ['g0', false],
      ['g1', false],
      ['g2', false],
    ]);
    // The two voters report a ghost: 2 of the 2 voters besides it.
    a.sendJson({ type: 'report', peerId: ghosts[0].peerId, reason: 'never opened a data channel' });
    b.sendJson({ type: 'report', peerId: ghosts[0].peerId, reason: 'never opened a data channel' });
    expect(await ghosts[0].error('ejected')).toMatchObject({
      message: expect.stringContaining('reported by 2 of the other 2 voting peers: never opened a data channel'),
    });
    await expect.poll(() => server.jobInfo('swarm')!.peers.map((p) => p.name)).toEqual(['a', 'b', 'g1', 'g2']);
  });

  it("refuses a name another member holds, and a join beyond the job's members per address", async () => {
    await joinAll(['victim']);
    const impostor = await RawPeer.open(server.wsUrl);
    impostor.sendJson(joinMessage({ job: 'swarm', token: 'tok', name: 'victim' }));
    expect(await impostor.error('name-taken')).toMatchObject({
      fatal: true,
      message: expect.stringContaining("already named 'victim'"),
    });
    await server.close();
    server = await startServer({
      staticDir: null,
      jobs: [
        {
          ...jobSpec('swarm', 'tok', 2, 4),
          config: { ...jobSpec('swarm', 'tok', 2, 4).config, maxPeersPerAddress: 2 },
        },
      ],
    });
    peers.splice(0);
    await joinAll(['x', 'y']);
    const third = await RawPeer.open(server.wsUrl);
    third.sendJson(joinMessage({ job: 'swarm', token: 'tok', name: 'z' }));
    expect(await third.error('too-many-from-address')).toMatchObject({ fatal: true });
    expect(server.jobInfo('swarm')!.size).toBe(2);
  });
});

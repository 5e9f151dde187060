import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startServer, type RunningServer } from '../../server/index.ts';
import { RawPeer, jobSpec } from './helpers.ts';

describe('signaling server: relaying signals', () => {
  let server: RunningServer;
  const peers: RawPeer[] = [];
  beforeEach(async () => {
    server = await startServer({ staticDir: null, jobs: [jobSpec('alpha', 'ta'), jobSpec('beta', 'tb')] });
  });
  afterEach(async () => {
    for (const p of peers.splice(0)) p.close();
    await server.close();
  });
  const join = async (job: string, token: string, name: string) => {
    const p = await RawPeer.join(server.wsUrl, job, token, name);
    peers.push(p);
    return p;
  };

  it('relays a signal to the addressed rank of the same job and epoch, naming the sender', async () => {
    const a0 = await join('alpha', 'ta', 'a0');
    const a1 = await join('alpha', 'ta', 'a1');
    await a0.membership(2);
    const offer = { type: 'offer', sdp: 'v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\n' };
    a0.sendJson({ type: 'signal', epoch: 2, to: 1, data: offer });
    expect(await a1.waitFor((m) => m.type === 'signal', 'signal')).toEqual({
      type: 'signal',
      epoch: 2,
      from: 0,
      data: offer,
    });
    a1.sendJson({ type: 'signal', epoch: 2, to: 0, data: { candidate: 'c1' } });
    expect(await a0.waitFor((m) => m.type === 'signal', 'signal')).toMatchObject({
      from: 1,
      data: { candidate: 'c1' },
    });
  });

  it('never lets a signal cross to another job, whatever rank it names', async () => {
    const a0 = await join('alpha', 'ta', 'a0');
    const b0 = await join('beta', 'tb', 'b0');
    const b1 = await join('beta', 'tb', 'b1');
    await b0.membership(2);
    // alpha has only rank 0: ranks 1 and 2 do not exist there, even though beta has a rank 1.
    for (const to of [1, 2]) a0.sendJson({ type: 'signal', epoch: 1, to, data: { leak: to } });
    expect((await a0.error('no-such-rank')).message).toContain("job 'alpha'");
    // beta's own epoch number (2) is not alpha's epoch either.
    a0.sendJson({ type: 'signal', epoch: 2, to: 0, data: { leak: 'epoch' } });
    await a0.error('stale-epoch');
    // A marker through beta arrives after anything the server could have relayed before it.
    b0.sendJson({ type: 'signal', epoch: 2, to: 1, data: { marker: true } });
    await b1.waitFor((m) => m.type === 'signal', 'marker');
    b1.sendJson({ type: 'signal', epoch: 2, to: 0, data: { marker: true } });
    await b0.waitFor((m) => m.type === 'signal', 'marker');
    for (const p of [b0, b1]) {
      expect(p.messages.filter((m) => m.type === 'signal').map((m) => (m as { data: unknown }).data)).toEqual([
        { marker: true },
      ]);
    }
    expect(a0.count((m) => m.type === 'signal')).toBe(0);
  });

  it('drops signals for an old epoch, to itself, and before join', async () => {
    const a0 = await join('alpha', 'ta', 'a0');
    const a1 = await join('alpha', 'ta', 'a1');
    await a0.membership(2);
    a0.sendJson({ type: 'signal', epoch: 1, to: 1, data: { old: true } });
    expect((await a0.error('stale-epoch')).message).toContain('epoch 2');
    a0.sendJson({ type: 'signal', epoch: 2, to: 0, data: { self: true } });
    await a0.error('no-such-rank');
    const stranger = await RawPeer.open(server.wsUrl);
    peers.push(stranger);
    stranger.sendJson({ type: 'signal', epoch: 2, to: 1, data: { sneaky: true } });
    expect(await stranger.error('not-joined')).toMatchObject({ fatal: true });
    expect((await stranger.closed).code).toBe(4000);
    a0.sendJson({ type: 'signal', epoch: 2, to: 1, data: { marker: true } });
    await a1.waitFor((m) => m.type === 'signal', 'marker');
    expect(a1.messages.filter((m) => m.type === 'signal').map((m) => (m as { data: unknown }).data)).toEqual([
      { marker: true },
    ]);
  });
});

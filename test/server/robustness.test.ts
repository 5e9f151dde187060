import { setImmediate as nextTurn } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, type RunningServer, type ServerOptions } from '../../server/index.ts';
import { PROTOCOL_VERSION } from '../../src/signaling/protocol.ts';
import { RawPeer, jobSpec } from './helpers.ts';
import { joinMessage, TEST_SIGNING_KEY } from '../support/signing-key.ts';

describe('signaling server: bad input and misbehaving peers', () => {
  let server: RunningServer | null = null;
  const peers: RawPeer[] = [];
  afterEach(async () => {
    for (const p of peers.splice(0)) p.ws.terminate();
    await server?.close();
    server = null;
  });
  const start = async (o: ServerOptions = {}) => {
    server = await startServer({ staticDir: null, jobs: [jobSpec('alpha', 'ta'), jobSpec('beta', 'tb')], ...o });
    return server;
  };
  const join = async (s: RunningServer, job: string, token: string, name: string) => {
    const p = await RawPeer.join(s.wsUrl, job, token, name);
    peers.push(p);
    return p;
  };
  const healthy = async (s: RunningServer) => (await fetch(`${s.url}/healthz`)).status;

  it('closes a connection that sends an oversize frame and keeps serving', async () => {
    const s = await start({ maxFrameBytes: 4096 });
    const a = await join(s, 'alpha', 'ta', 'a');
    const b = await join(s, 'alpha', 'ta', 'b');
    a.sendJson({ type: 'signal', epoch: 2, to: 1, data: 'x'.repeat(10_000) });
    expect((await a.closed).code).toBe(1009);
    expect(await b.waitFor((m) => m.type === 'peer-left', 'peer-left')).toMatchObject({ peerId: a.peerId });
    expect(b.count((m) => m.type === 'signal')).toBe(0);
    expect(await healthy(s)).toBe(200);
    expect(await s.metricsText()).toMatch(/ringtrain_errors_total\{code="too-large"\} 1/);
  });

  it('answers malformed JSON, unknown types, schema violations and binary frames after join, and keeps the peer', async () => {
    const s = await start();
    const a = await join(s, 'alpha', 'ta', 'a');
    const b = await join(s, 'alpha', 'ta', 'b');
    await a.membership(2);
    a.ws.send('{"type": "signal", "epoch": 2,');
    expect(await a.error('bad-json')).toMatchObject({ fatal: false });
    a.sendJson({ type: 'teleport', to: 1 });
    expect((await a.error('unknown-type')).message).toContain("'teleport'");
    a.sendJson([1, 2, 3]);
    a.sendJson(null);
    a.sendJson({ type: 'signal', epoch: 2, to: -1, data: {} });
    a.sendJson({ type: 'signal', epoch: 2, to: 1, data: {}, extra: 'field' });
    a.sendJson({ type: 'signal', epoch: 2, to: 1 });
    a.sendJson({ type: 'progress', step: 1, loss: 'NaN' });
    a.ws.send(Buffer.from([0xde, 0xad, 0xbe, 0xef]));
    a.ws.send('\u0000'.repeat(100));
    // Deep enough that serialising it again would overflow the stack.
    const deep = 30_000;
    a.ws.send(`{"type":"signal","epoch":2,"to":1,"data":${'['.repeat(deep)}${']'.repeat(deep)}}`);
    a.sendJson({ type: 'signal', epoch: 2, to: 1, data: { ok: 1 } });
    await b.waitFor((m) => m.type === 'signal', 'the good signal');
    const codes = a.messages.filter((m) => m.type === 'error').map((m) => (m as { code: string }).code);
    expect(codes).toEqual([
      'bad-json',
      'unknown-type',
      'unknown-type',
      'unknown-type',
      'bad-message',
      'bad-message',
      'bad-message',
      'bad-message',
      'bad-message',
      'bad-json',
      'bad-message',
    ]);
    expect(b.messages.filter((m) => m.type === 'signal')).toEqual([
      { type: 'signal', epoch: 2, from: 0, data: { ok: 1 } },
    ]);
    expect(s.jobInfo('alpha')?.size).toBe(2);
    expect(await healthy(s)).toBe(200);
  });

  it('closes a connection whose first message is garbage, and one that never joins', async () => {
    const s = await start({ joinTimeoutMs: 200 });
    const garbage = await RawPeer.open(s.wsUrl);
    peers.push(garbage);
    garbage.ws.send('not json at all');
    expect(await garbage.error('bad-json')).toMatchObject({ fatal: true });
    expect((await garbage.closed).code).toBe(4000);
    const silent = await RawPeer.open(s.wsUrl);
    peers.push(silent);
    expect(await silent.error('join-timeout')).toMatchObject({ fatal: true });
    await silent.closed;
    expect(await healthy(s)).toBe(200);
  });

  it('a flood on one job does not starve another job', async () => {
    // A small bucket that never refills: counts, not times, decide who is dropped.
    const s = await start({ rateLimit: { capacity: 50, refillPerS: 0, maxDrops: 400 } });
    const flooder = await join(s, 'alpha', 'ta', 'flooder');
    const victim = await join(s, 'alpha', 'ta', 'victim');
    const b0 = await join(s, 'beta', 'tb', 'b0');
    const b1 = await join(s, 'beta', 'tb', 'b1');
    await flooder.membership(2);
    await b0.membership(2);
    const FLOOD = 3000;
    const BETA = 40;
    for (let i = 0; i < FLOOD; i++) {
      flooder.sendJson({ type: 'signal', epoch: 2, to: 1, data: { i, pad: 'x'.repeat(200) } });
      // Job beta keeps talking while the flood goes on.
      if (i % (FLOOD / BETA) === 0)
        b0.sendJson({ type: 'signal', epoch: 2, to: 1, data: { beta: i / (FLOOD / BETA) } });
      if (i % 100 === 0) await nextTurn();
    }
    expect((await flooder.closed).code).toBe(4008);
    expect(await flooder.error('flood')).toMatchObject({ fatal: true });
    await b1.waitFor(
      (m) => m.type === 'signal' && (m.data as { beta?: number }).beta === BETA - 1,
      'the last beta signal',
    );
    const betaSeen = b1.messages
      .filter((m) => m.type === 'signal')
      .map((m) => ((m as { data: unknown }).data as { beta: number }).beta);
    expect(betaSeen).toEqual(Array.from({ length: BETA }, (_, i) => i));
    expect(b0.count((m) => m.type === 'error')).toBe(0);
    // The flooder's bucket held 50 units: one went to its join, 49 signals got through.
    expect(victim.count((m) => m.type === 'signal')).toBe(49);
    expect(flooder.count((m) => m.type === 'error' && m.code === 'rate-limited')).toBeGreaterThanOrEqual(1);
    expect(await victim.waitFor((m) => m.type === 'peer-left', 'peer-left')).toMatchObject({
      peerId: flooder.peerId,
      reason: 'dropped',
    });
    expect(await healthy(s)).toBe(200);
    expect(await s.metricsText()).toMatch(/ringtrain_errors_total\{code="flood"\} 1/);
  });

  it('drops a peer that stops answering heartbeats and tells the others who it was', async () => {
    // Generous, so that a busy test machine does not drop the live peer too (the server also skips judging after its own
    // stalls).
    const s = await start({ heartbeatMs: 250, missedHeartbeats: 4 });
    const alive = await join(s, 'alpha', 'ta', 'alive');
    const zombie = await join(s, 'alpha', 'ta', 'zombie');
    // The live peer answers every ping; the zombie never says anything again.
    alive.ws.on('message', (d) => {
      const m = JSON.parse(String(d));
      if (m.type === 'ping') alive.sendJson({ type: 'pong', seq: m.seq });
    });
    const left = await alive.waitFor((m) => m.type === 'peer-left', 'peer-left');
    expect(left).toMatchObject({ peerId: zombie.peerId, name: 'zombie', rank: 1, reason: 'heartbeat' });
    await zombie.closed;
    expect(zombie.count((m) => m.type === 'ping')).toBeGreaterThanOrEqual(1);
    expect(await alive.membership(3)).toMatchObject({ size: 1 });
    expect(await s.metricsText()).toMatch(/ringtrain_peers_left_total\{job="alpha",reason="heartbeat"\} 1/);
  });

  it('tells peers when it shuts down and closes them', async () => {
    const s = await start();
    const a = await join(s, 'alpha', 'ta', 'a');
    await s.close();
    expect(await a.error('server-closing')).toMatchObject({ fatal: true });
    expect((await a.closed).code).toBe(1001);
    server = null;
  });

  it('closes a connection that sends invalid UTF-8 text, and refuses handshakes beyond the per-address limit', async () => {
    const s = await start({ limits: { maxHandshakesPerAddress: 2 } });
    const a = await join(s, 'alpha', 'ta', 'a');
    a.ws.send(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), { binary: false });
    expect((await a.closed).code).toBe(1007);
    const one = await RawPeer.open(s.wsUrl);
    const two = await RawPeer.open(s.wsUrl);
    peers.push(one, two);
    await expect(RawPeer.open(s.wsUrl)).rejects.toThrow(/429/);
    // Joining frees the handshake place: the next one is let in.
    one.sendJson(joinMessage({ job: 'alpha', token: 'ta' }));
    await one.waitFor((m) => m.type === 'welcome', 'welcome');
    peers.push(await RawPeer.open(s.wsUrl));
    expect(await healthy(s)).toBe(200);
    expect(await s.metricsText()).toMatch(/ringtrain_refusals_total\{reason="address-handshakes"\} 1\b/);
  });

  it('refuses upgrades on other paths and joins with the wrong protocol field types', async () => {
    const s = await start();
    await expect(RawPeer.open(s.wsUrl.replace('/ws', '/other'))).rejects.toThrow(/404/);
    const p = await RawPeer.open(s.wsUrl);
    peers.push(p);
    p.sendJson({
      type: 'join',
      signingKey: TEST_SIGNING_KEY,
      protocol: String(PROTOCOL_VERSION),
      job: 'alpha',
      token: 'ta',
      runtime: 'node',
    });
    expect((await p.error('bad-message')).message).toContain('protocol');
    await p.closed;
    expect(await healthy(s)).toBe(200);
  });
});

/**
 * One client cannot lock the others out. "Other addresses" are other loopback
 * addresses (127.0.0.2, 127.0.0.3, ...): every client socket binds its
 * localAddress, and the server counts per remote address.
 * Nothing here is timed: the legitimate peer's join is awaited (generous guard);
 * bench/signaling.ts measures how long it takes.
 */
import { connect as connectSocket, type Socket } from 'node:net';
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { Admission, DEFAULT_ADMISSION_LIMITS, addressKey } from '../../server/admission.ts';
import { startServer, type RunningServer, type ServerOptions } from '../../server/index.ts';
import { connect, type SignalingClient } from '../../src/signaling/client.node.ts';
import type { WebSocketConstructor } from '../../src/signaling/client.ts';
import { RawPeer, jobSpec } from './helpers.ts';
import { joinMessage } from '../support/signing-key.ts';

/** The `ws` WebSocket, bound to one local (loopback) address. */
function wsFrom(localAddress: string): WebSocketConstructor {
  return class extends WebSocket {
    constructor(url: string) {
      super(url, { localAddress });
    }
  } as unknown as WebSocketConstructor;
}

/** Opens `n` WebSockets from `localAddress` that never say a word; resolves with those the server let in. */
async function silentSockets(
  wsUrl: string,
  localAddress: string,
  n: number,
  batch = 100,
): Promise<{ open: WebSocket[]; refused: string[] }> {
  const open: WebSocket[] = [];
  const refused: string[] = [];
  for (let i = 0; i < n; i += batch) {
    const tries = Array.from({ length: Math.min(batch, n - i) }, () => RawPeer.open(wsUrl, { localAddress }));
    for (const r of await Promise.allSettled(tries)) {
      if (r.status === 'fulfilled') open.push(r.value.ws);
      else refused.push(String(r.reason?.message ?? r.reason));
    }
  }
  return { open, refused };
}

const metric = (text: string, name: string, labels: string): number => {
  const m = new RegExp(`^${name}\\{${labels}\\} (\\d+)`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
};

describe('signaling server: per-address and handshake limits', () => {
  let server: RunningServer | null = null;
  const sockets: (WebSocket | Socket)[] = [];
  const clients: SignalingClient[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.leave();
    for (const s of sockets.splice(0)) s instanceof WebSocket ? s.terminate() : s.destroy();
    await server?.close();
    server = null;
  });
  const start = async (o: ServerOptions = {}) =>
    (server = await startServer({ staticDir: null, jobs: [jobSpec('alpha', 'ta', 1, 4)], ...o }));

  it(
    '1,030 silent upgraded sockets from one address do not stop a peer from another address joining',
    { timeout: 120_000 },
    async () => {
      // A join deadline far beyond the test: the silent sockets stay open throughout, so only the limits let the peer
      // in.
      const s = await start({ joinTimeoutMs: 600_000 });
      const flood = await silentSockets(s.wsUrl, '127.0.0.2', 1030);
      sockets.push(...flood.open);
      expect(flood.open.length).toBe(16);
      expect(flood.refused.length).toBe(1014);
      expect(flood.refused.every((r) => /429/.test(r))).toBe(true);

      const peer = await connect(s.url, { job: 'alpha', token: 'ta', name: 'legit', WebSocket: wsFrom('127.0.0.3') });
      clients.push(peer);
      expect(peer.membership).toMatchObject({ size: 1, ready: true });
      // Still held open, still not joined.
      expect(flood.open.every((ws) => ws.readyState === WebSocket.OPEN)).toBe(true);
      const text = await s.metricsText();
      expect(metric(text, 'ringtrain_refusals_total', 'reason="address-handshakes"')).toBe(1014);
      expect(text).toMatch(/^ringtrain_handshakes 16$/m);
      expect(text).toMatch(/^ringtrain_peers\{job="alpha"\} 1$/m);
    },
  );

  it('closes a socket that sends nothing after the upgrade, and counts it', async () => {
    const s = await start({ joinTimeoutMs: 300 });
    const silent = await RawPeer.open(s.wsUrl, { localAddress: '127.0.0.2' });
    sockets.push(silent.ws);
    expect(await silent.error('join-timeout')).toMatchObject({ fatal: true });
    expect((await silent.closed).code).toBe(4000);
    expect(metric(await s.metricsText(), 'ringtrain_refusals_total', 'reason="join-timeout"')).toBe(1);
  });

  it('cuts TCP sockets beyond the per-address limit, whatever they send', async () => {
    const s = await start({ limits: { maxSocketsPerAddress: 8 } });
    const port = s.port;
    const raw = await Promise.all(
      Array.from(
        { length: 12 },
        () =>
          new Promise<{ socket: Socket; closed: Promise<void> }>((resolve) => {
            const socket = connectSocket({ host: '127.0.0.1', port, localAddress: '127.0.0.2' }, () =>
              resolve({ socket, closed }),
            );
            const closed = new Promise<void>((r) => socket.on('close', () => r()));
            socket.on('error', () => undefined);
            sockets.push(socket);
          }),
      ),
    );
    // The server cut the four beyond the limit; the eight first ones are still open (silent, no request yet).
    await Promise.race([
      Promise.all(raw.slice(8).map((r) => r.closed)),
      new Promise((_, rej) => setTimeout(() => rej(new Error('sockets beyond the limit were not cut')), 15_000)),
    ]);
    expect(metric(await s.metricsText(), 'ringtrain_refusals_total', 'reason="address-sockets"')).toBe(4);
    // Another address is not affected.
    const peer = await connect(s.url, { job: 'alpha', token: 'ta', WebSocket: wsFrom('127.0.0.3') });
    clients.push(peer);
    expect(peer.membership?.size).toBe(1);
  });

  it('at the server-wide handshake cap, the silent socket that waited longest makes room for a new one', async () => {
    const s = await start({ joinTimeoutMs: 600_000, limits: { maxHandshakes: 20, maxHandshakesPerAddress: 4 } });
    // Ten addresses, four silent sockets each: forty handshakes for twenty places.
    const held: RawPeer[] = [];
    for (let a = 10; a < 20; a++) {
      for (let i = 0; i < 4; i++) held.push(await RawPeer.open(s.wsUrl, { localAddress: `127.0.0.${a}` }));
    }
    sockets.push(...held.map((p) => p.ws));
    // The twenty oldest were told why and closed, the twenty newest are open.
    for (const p of held.slice(0, 20)) expect(await p.error('server-busy')).toMatchObject({ fatal: true });
    await Promise.all(held.slice(0, 20).map((p) => p.closed));
    expect(held.slice(20).every((p) => p.ws.readyState === WebSocket.OPEN)).toBe(true);
    const peer = await connect(s.url, { job: 'alpha', token: 'ta', name: 'legit', WebSocket: wsFrom('127.0.0.3') });
    clients.push(peer);
    expect(peer.membership?.size).toBe(1);
    expect(metric(await s.metricsText(), 'ringtrain_refusals_total', 'reason="evicted"')).toBe(21);
  });

  it('stops an address that tries wrong tokens, not the others; the allowance comes back with time', async () => {
    const s = await start({ limits: { badTokenBurst: 3, badTokenRefillMs: 600_000 } });
    const tryJoin = async (from: string, token: string) => {
      const p = await RawPeer.open(s.wsUrl, { localAddress: from });
      sockets.push(p.ws);
      p.sendJson(joinMessage({ job: 'alpha', token }));
      const m = await p.waitFor((x) => x.type === 'welcome' || x.type === 'error', 'an answer to join');
      return m.type === 'error' ? m.code : m.type;
    };
    const guesses = [];
    for (const guess of ['a', 'b', 'c', 'ta']) guesses.push(await tryJoin('127.0.0.2', guess));
    // The fourth try has the right token, but the address used up its allowance guessing.
    expect(guesses).toEqual(['bad-token', 'bad-token', 'bad-token', 'too-many-bad-tokens']);
    expect(await tryJoin('127.0.0.3', 'ta')).toBe('welcome');
    expect(metric(await s.metricsText(), 'ringtrain_refusals_total', 'reason="bad-tokens"')).toBe(1);
    // Guessing over HTTP (Authorization: Bearer on /api/jobs) draws on the same allowance.
    const api = (token: string) => fetch(`${s.url}/api/jobs/alpha`, { headers: { authorization: `Bearer ${token}` } });
    expect((await api('ta')).status).toBe(200);
    const statuses = [];
    for (const guess of ['a', 'b', 'c', 'ta']) statuses.push((await api(guess)).status);
    expect(statuses).toEqual([404, 404, 404, 429]);

    let now = 0;
    const admission = new Admission(
      { ...DEFAULT_ADMISSION_LIMITS, badTokenBurst: 2, badTokenRefillMs: 1000 },
      () => now,
    );
    admission.badToken('x');
    admission.badToken('x');
    expect(admission.mayTryToken('x')).toBe(false);
    expect(admission.mayTryToken('y')).toBe(true);
    now = 999;
    expect(admission.mayTryToken('x')).toBe(false);
    now = 1000;
    expect(admission.mayTryToken('x')).toBe(true);
  });

  it('groups addresses by client: IPv4, IPv4-mapped IPv6, and an IPv6 /64', () => {
    expect(addressKey('127.0.0.2')).toBe('127.0.0.2');
    expect(addressKey('::ffff:10.1.2.3')).toBe('10.1.2.3');
    expect(addressKey('2001:db8:1:2:aaaa::1')).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:db8:1:2::ffff')).toBe(addressKey('2001:0db8:0001:0002:1:2:3:4'));
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
    expect(addressKey(undefined)).toBe('unknown');
  });
});

/**
 * Signaling server figures, printed as one JSON line:
 *   - join: connect() to first membership, for `peers` peers joining one after another;
 *   - relay: signals per second from one peer to another through the server
 *     (ICE-candidate-sized payloads), rate limit lifted;
 *   - relayUnderFlood: the same, while a peer of another job floods with the rate
 *     limit lifted too (the worst case: with the default limit the flooder is cut off
 *     after 200 + 1000 frames);
 *   - joinUnderSilentSockets: connect() to first membership from 127.0.0.3 while
 *     1,030 WebSocket upgrades from 127.0.0.2 try to sit silent (default limits:
 *     16 stay open, the rest are refused 429), and joinUnderSpreadSilentSockets: the
 *     same while 1,100 silent sockets from 70 addresses fill the server-wide cap
 *     of handshakes (the oldest are evicted). joinQuietMs is the same join with no
 *     attack, measured in the same run.
 * Run inside a private network namespace:
 *   sh scripts/in-netns.sh npx tsx bench/signaling.ts [--signals N] [--peers N]
 */
import WebSocket from 'ws';
import { startServer } from '../server/index.ts';
import { connect } from '../src/signaling/client.node.ts';
import type { WebSocketConstructor } from '../src/signaling/client.ts';
import { PROTOCOL_VERSION } from '../src/signaling/protocol.ts';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const SIGNALS = arg('signals', 20_000);
const PEERS = arg('peers', 16);
const candidate = {
  candidate: {
    candidate: 'candidate:1 1 udp 2122260223 10.213.0.1 54321 typ host generation 0',
    sdpMid: '0',
    sdpMLineIndex: 0,
  },
};

const job = (id: string, maxPeers: number) => ({
  id,
  token: 't',
  config: { model: 'cnn', optimizer: 'sgd', hyperparameters: { lr: 0.05 }, batchPerPeer: 64, minPeers: 2, maxPeers },
});

async function relayRate(url: string, jobId: string, n: number): Promise<number> {
  const a = await connect(url, { job: jobId, token: 't' });
  const b = await connect(url, { job: jobId, token: 't' });
  const m = await b.waitForReady();
  let got = 0;
  const done = new Promise<void>((resolve) => b.signaler(m.epoch).onSignal(() => ++got === n && resolve()));
  await a.waitForReady();
  const send = a.signaler(m.epoch);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    send.send(1, candidate);
    if (i % 500 === 0) await new Promise((r) => setImmediate(r));
  }
  await done;
  const seconds = (performance.now() - t0) / 1000;
  await a.leave();
  await b.leave();
  return n / seconds;
}

const unlimited = { capacity: 1e9, refillPerS: 1e9 };
const server = await startServer({
  staticDir: null,
  jobs: [job('join', PEERS), job('relay', 2)],
  rateLimit: unlimited,
});
const joinMs: number[] = [];
const joined = [];
for (let i = 0; i < PEERS; i++) {
  const t0 = performance.now();
  joined.push(await connect(server.url, { job: 'join', token: 't' }));
  joinMs.push(performance.now() - t0);
}
for (const c of joined) await c.leave();
const relayPerS = await relayRate(server.url, 'relay', SIGNALS);
await server.close();

// Under flood, rate limit lifted: the flooder (job 'noisy') sends as fast as it can, never cut off.
const flooded = await startServer({
  staticDir: null,
  jobs: [job('quiet', 2), job('noisy', 2)],
  rateLimit: { capacity: 1e9, refillPerS: 1e9 },
});
const flooder = new WebSocket(flooded.wsUrl);
await new Promise((r) => flooder.once('open', r));
flooder.send(JSON.stringify({ type: 'join', protocol: PROTOCOL_VERSION, job: 'noisy', token: 't', runtime: 'node' }));
let flooding = true;
const flood = (async () => {
  const frame = JSON.stringify({ type: 'signal', epoch: 1, to: 5, data: 'x'.repeat(2000) });
  while (flooding && flooder.readyState === WebSocket.OPEN) {
    for (let i = 0; i < 200; i++) flooder.send(frame);
    await new Promise((r) => setImmediate(r));
  }
})();
const relayUnderFloodPerS = await relayRate(flooded.url, 'quiet', SIGNALS);
flooding = false;
await flood;
flooder.terminate();
await flooded.close();

// One client's silent sockets: default limits, the attack from other loopback addresses than the peer's.
function wsFrom(localAddress: string): WebSocketConstructor {
  return class extends WebSocket {
    constructor(url: string) {
      super(url, { localAddress });
    }
  } as unknown as WebSocketConstructor;
}
async function silent(wsUrl: string, localAddress: string, n: number): Promise<WebSocket[]> {
  const tries = Array.from(
    { length: n },
    () =>
      new Promise<WebSocket | null>((resolve) => {
        const ws = new WebSocket(wsUrl, { localAddress });
        ws.once('open', () => resolve(ws));
        ws.once('error', () => resolve(null));
      }),
  );
  return (await Promise.all(tries)).filter((w): w is WebSocket => w !== null);
}
async function timedJoin(url: string, from: string): Promise<number> {
  const t0 = performance.now();
  const c = await connect(url, { job: 'held', token: 't', WebSocket: wsFrom(from) });
  const ms = performance.now() - t0;
  await c.leave();
  return ms;
}
const held = await startServer({ staticDir: null, jobs: [job('held', 2)] });
const joinQuietMs = await timedJoin(held.url, '127.0.0.3');
const oneAddress = await silent(held.wsUrl, '127.0.0.2', 1030);
const joinUnderSilentSocketsMs = await timedJoin(held.url, '127.0.0.3');
const spread = (
  await Promise.all(Array.from({ length: 70 }, (_, i) => silent(held.wsUrl, `127.0.0.${10 + i}`, 16)))
).flat();
const joinUnderSpreadSilentSocketsMs = await timedJoin(held.url, '127.0.0.4');
const heldText = await held.metricsText();
for (const ws of [...oneAddress, ...spread]) ws.terminate();
await held.close();

const sorted = [...joinMs].sort((x, y) => x - y);
console.log(
  JSON.stringify({
    bench: 'signaling',
    peers: PEERS,
    joinMsMedian: Number(sorted[Math.floor(sorted.length / 2)].toFixed(2)),
    joinMsMax: Number(sorted[sorted.length - 1].toFixed(2)),
    signals: SIGNALS,
    relayPerS: Math.round(relayPerS),
    relayUnderFloodPerS: Math.round(relayUnderFloodPerS),
    joinQuietMs: Number(joinQuietMs.toFixed(2)),
    joinUnderSilentSocketsMs: Number(joinUnderSilentSocketsMs.toFixed(2)),
    silentSocketsHeld: oneAddress.length,
    joinUnderSpreadSilentSocketsMs: Number(joinUnderSpreadSilentSocketsMs.toFixed(2)),
    refusals: Object.fromEntries(
      [...heldText.matchAll(/^ringtrain_refusals_total\{reason="([^"]+)"\} (\d+)/gm)].map((m) => [m[1], Number(m[2])]),
    ),
    note: 'flood: another job sending 2 KB frames to a missing rank as fast as one socket can (each answered with an error)',
  }),
);

/**
 * Test helpers: a raw protocol peer over `ws` (so tests can send anything,
 * including garbage) and small job specs. Waits fail with a description
 * after a generous guard time; no test asserts on timing.
 */
import { request } from 'node:http';
import WebSocket from 'ws';
import { type JobSpec, type ServerMessage } from '../../src/signaling/protocol.ts';
import { joinMessage } from '../support/signing-key.ts';

export const WAIT_GUARD_MS = 15_000;

export function jobSpec(id: string, token: string, minPeers = 2, maxPeers = 4): JobSpec {
  return {
    id,
    token,
    config: {
      model: 'mlp',
      optimizer: 'sgd',
      hyperparameters: { lr: 0.1, momentum: 0.9 },
      batchPerPeer: 32,
      minPeers,
      maxPeers,
    },
  };
}

export class RawPeer {
  readonly messages: ServerMessage[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters: { pred: (m: ServerMessage) => boolean; resolve: (m: ServerMessage) => void }[] = [];

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const msg = JSON.parse(String(data)) as ServerMessage;
      this.messages.push(msg);
      for (const w of [...this.waiters]) {
        if (w.pred(msg)) {
          this.waiters.splice(this.waiters.indexOf(w), 1);
          w.resolve(msg);
        }
      }
    });
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
  }

  /** `options` go to `ws` (localAddress: the loopback address to connect from; ca: a test certificate). */
  static open(wsUrl: string, options?: WebSocket.ClientOptions): Promise<RawPeer> {
    const ws = new WebSocket(wsUrl, options);
    const peer = new RawPeer(ws);
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(peer));
      ws.once('error', reject);
    });
  }

  /** Opens, joins, and waits for the welcome. */
  static async join(
    wsUrl: string,
    job: string,
    token: string,
    name?: string,
    options?: WebSocket.ClientOptions,
  ): Promise<RawPeer & { peerId: string }> {
    const peer = await RawPeer.open(wsUrl, options);
    peer.sendJson(joinMessage({ job, token, ...(name ? { name } : {}) }));
    const first = await peer.waitFor((m) => m.type === 'welcome' || m.type === 'error', 'welcome');
    if (first.type !== 'welcome') throw new Error(`join refused: ${JSON.stringify(first)}`);
    return Object.assign(peer, { peerId: first.peerId });
  }

  sendJson(msg: unknown): void {
    this.ws.send(JSON.stringify(msg));
  }

  /** The first message, already received or still to come, that matches. */
  waitFor<T extends ServerMessage>(pred: (m: ServerMessage) => m is T, what: string): Promise<T>;
  waitFor(pred: (m: ServerMessage) => boolean, what: string): Promise<ServerMessage>;
  waitFor(pred: (m: ServerMessage) => boolean, what: string): Promise<ServerMessage> {
    const seen = this.messages.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`timed out waiting for ${what}; got: ${JSON.stringify(this.messages.slice(-5))}`));
      }, WAIT_GUARD_MS);
      this.waiters.push({
        pred,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
      });
    });
  }

  membership(epoch: number): Promise<Extract<ServerMessage, { type: 'membership' }>> {
    return this.waitFor(
      (m): m is Extract<ServerMessage, { type: 'membership' }> => m.type === 'membership' && m.epoch === epoch,
      `membership epoch ${epoch}`,
    );
  }

  error(code: string): Promise<Extract<ServerMessage, { type: 'error' }>> {
    return this.waitFor(
      (m): m is Extract<ServerMessage, { type: 'error' }> => m.type === 'error' && m.code === code,
      `error ${code}`,
    );
  }

  count(pred: (m: ServerMessage) => boolean): number {
    return this.messages.filter(pred).length;
  }

  close(): void {
    this.ws.close();
  }
}

/** A raw HTTP GET (no URL normalisation, unlike fetch), for traversal tests. */
export function rawGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

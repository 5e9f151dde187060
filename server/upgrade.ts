/**
 * WebSocket upgrades on /ws: who may upgrade (./admission.ts), and the
 * Connection each accepted socket becomes. Any other upgrade path is 404.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer } from 'ws';
import { WS_PATH } from '../src/signaling/protocol.ts';
import { RefusalReason, addressKey, type Admission } from './admission.ts';
import { Connection, type ConnectionContext } from './connection.ts';
import { iceForPeer } from './ice.ts';
import type { Job } from './jobs.ts';
import type { ServerMetrics } from './metrics.ts';
import { pathOf } from './http-routes.ts';
import type { ServerSettings } from './options.ts';

export interface UpgradeContext {
  settings: ServerSettings;
  jobs: ReadonlyMap<string, Job>;
  admission: Admission;
  metrics: ServerMetrics;
  /** Every open connection; each is added on upgrade and removed when its socket closes. */
  connections: Set<Connection>;
}

/** What every Connection of this server shares: its limits, its jobs, its metrics. */
function connectionContext({ settings: s, jobs, admission, metrics }: UpgradeContext): ConnectionContext {
  return {
    admission,
    job: (id: string) => jobs.get(id),
    metrics,
    rateLimit: s.rateLimit,
    heartbeatMs: s.heartbeatMs,
    missedHeartbeats: s.missedHeartbeats,
    joinTimeoutMs: s.joinTimeoutMs,
    maxBufferedBytes: s.maxBufferedBytes,
    iceFor: (job: Job, peerId: string) => iceForPeer(job.ice ?? s.ice, s.ice, peerId, Date.now()),
    log: s.log,
  };
}

/** Takes the upgrades of `http`; returns the WebSocketServer, for shutdown to close. */
export function acceptWebSockets(http: Server, ctx: UpgradeContext): WebSocketServer {
  const { admission, metrics, connections } = ctx;
  const connectionCtx = connectionContext(ctx);
  const wss = new WebSocketServer({ noServer: true, maxPayload: ctx.settings.maxFrameBytes, perMessageDeflate: false });
  wss.on('connection', (ws, req: IncomingMessage) => {
    const key = addressKey(req.socket.remoteAddress);
    const conn = new Connection(ws, connectionCtx, `${req.socket.remoteAddress}:${req.socket.remotePort}`, key);
    connections.add(conn);
    metrics.connectionsTotal.inc();
    ws.on('close', () => connections.delete(conn));
    admission.handshakeStarted(conn, key);
  });
  http.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => socket.destroy());
    const pathname = pathOf(req);
    const refuse = (status: string): void => {
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    };
    if (pathname !== WS_PATH) return refuse('404 Not Found');
    // Too many handshakes from one address: refuse it. Too many from everyone: the
    // oldest is evicted when this one is counted (see admission.ts).
    if (!admission.mayUpgrade(addressKey(req.socket.remoteAddress))) {
      metrics.refused(RefusalReason.AddressHandshakes);
      return refuse('429 Too Many Requests');
    }
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req));
  });
  return wss;
}

/**
 * Closing the server: every peer is told and its connection closed, then the
 * listener; a peer that does not answer the close handshake is cut off.
 */
import type { Server } from 'node:http';
import type { WebSocketServer } from 'ws';
import type { Connection } from './connection.ts';

/** How long close() waits for clients to answer the close handshake before cutting them off. */
const CLOSE_GRACE_MS = 1000;

export interface ShutdownParts {
  stopHeartbeat: () => void;
  connections: Iterable<Connection>;
  wss: WebSocketServer;
  http: Server;
}

export async function shutDown({ stopHeartbeat, connections, wss, http }: ShutdownParts): Promise<void> {
  stopHeartbeat();
  for (const c of connections) c.shutdown();
  // A client that never answers the close handshake must not hold us up.
  const force = setTimeout(() => {
    for (const c of connections) c.terminate();
  }, CLOSE_GRACE_MS);
  await new Promise<void>((resolve) => wss.close(() => resolve()));
  clearTimeout(force);
  http.closeAllConnections();
  await new Promise<void>((resolve) => http.close(() => resolve()));
}

/**
 * The listener itself: node:http, or node:https with a certificate, with the
 * per-address socket limit applied at the TCP accept, and listen() with its
 * errors turned into ones that say what to do.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { ErrorCode, RingtrainError } from '../src/core/errors.ts';
import { RefusalReason, addressKey, type Admission } from './admission.ts';
import type { ServerMetrics } from './metrics.ts';
import type { ServerSettings } from './options.ts';

/** How long a socket may take to send its request headers (a silent one holds a socket until then). */
const HEADERS_TIMEOUT_MS = 10_000;

/** The http(s) server, not yet listening; throws InvalidArgument for a certificate and key node:tls refuses. */
export function createHttpServer(
  tls: ServerSettings['tls'],
  onRequest: (req: IncomingMessage, res: ServerResponse) => void,
  admission: Admission,
  metrics: ServerMetrics,
): Server {
  const httpOptions = {
    headersTimeout: HEADERS_TIMEOUT_MS,
    requestTimeout: 2 * HEADERS_TIMEOUT_MS,
    connectionsCheckingInterval: 1000,
  };
  let http: Server;
  try {
    http = tls
      ? createTlsServer({ ...httpOptions, cert: tls.cert, key: tls.key }, onRequest)
      : createServer(httpOptions, onRequest);
  } catch (err) {
    // node:tls names the problem (a key that does not match the certificate, a PEM it cannot parse).
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `cannot serve TLS with this certificate and key: ${(err as Error).message}; give the PEM certificate and its own private key`,
      undefined,
      { cause: err },
    );
  }
  // Counted from the TCP accept (before TLS), so sockets that never send a request count too.
  http.on('connection', (socket: Socket) => {
    const key = addressKey(socket.remoteAddress);
    if (!admission.socketOpened(key)) {
      metrics.refused(RefusalReason.AddressSockets);
      return void socket.destroy();
    }
    socket.once('close', () => admission.socketClosed(key));
  });
  http.on('clientError', (_err, socket) => socket.destroy());
  if (tls) http.on('tlsClientError', (_err: Error, socket: Duplex) => socket.destroy());
  return http;
}

/** Listens on host:port; once listening, later server errors are logged rather than thrown. */
export async function listen(http: Server, host: string, port: number, log: (line: string) => void): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    http.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        new RingtrainError(
          ErrorCode.InvalidArgument,
          `cannot listen on ${host}:${port}: ${err.code ?? err.message}; pick another --port`,
          undefined,
          { cause: err },
        ),
      ),
    );
    http.listen(port, host, () => resolve());
  });
  http.on('error', (err) => log(`http server error: ${err.message}`));
}

/**
 * Dialling a TCP link's listener (tcp-link.node.ts): one connection, authenticated by the
 * handshake (tcp-handshake.node.ts) before anything else is read from it, and handed over with
 * whatever frames arrived behind the handshake. A plain connection reads where its link's reader
 * says (stream-link.node.ts): most of a large message straight into the buffer it is delivered in.
 */
import { createConnection, type Socket } from 'node:net';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { MAX_MESSAGE_BYTES } from './frame.ts';
import { LengthPrefixedReader, lengthPrefix } from './stream-frames.ts';
import { Inflow } from './stream-link.node.ts';
import { splitHostPort, type LinkIdentity } from './tcp-endpoint.ts';
import {
  answerSchema,
  encodeHandshake,
  HANDSHAKE_VERSION,
  type HelloRole,
  MAX_HANDSHAKE_BYTES,
  newNonce,
  proofMatches,
  proofOf,
  readHandshake,
} from './tcp-handshake.node.ts';
import { ErrorCode, RingtrainError } from '../core/errors.ts';

/**
 * What a dialled socket reads into at once (`onread`), reused for every read: as much as the
 * kernel hands over in one go on loopback, a whole frame.
 */
const READ_BUFFER_BYTES = 256 * 1024;

/**
 * One authenticated connection to the listener at `address`. A plain one reads into one reused
 * buffer (`onread`); over TLS (a `fingerprint`) it reads by 'data' events.
 */
export function dialAuthenticated(
  address: string,
  id: LinkIdentity,
  key: Uint8Array,
  timeoutMs: number,
  role: HelloRole,
  fingerprint?: string,
): Promise<Authenticated> {
  const target = splitHostPort(address);
  if (!target) return Promise.reject(transportError(`rank ${id.to} advertised '${address}', which is not host:port`));
  return new Promise<Authenticated>((resolve, reject) => {
    const inflow = openSocket(target, fingerprint);
    const socket = inflow.socket;
    const fail = (why: string, cause?: unknown): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(transportError(`TCP link to rank ${id.to} at ${address}: ${why}`, cause));
    };
    const timer = setTimeout(() => fail(`no authenticated connection within ${timeoutMs} ms`), timeoutMs);
    const nonce = newNonce();
    const reader = new LengthPrefixedReader(MAX_HANDSHAKE_BYTES, (bytes) => {
      const answer = readHandshake(bytes, answerSchema);
      if (!answer) return fail('the listener did not answer the handshake');
      if (!proofMatches(answer.proof, proofOf(key, 'listener', id, role, nonce, answer.nonce)))
        return fail("the listener does not hold this epoch's link key (refused it)");
      send(socket, encodeHandshake({ proof: proofOf(key, 'dialer', id, role, nonce, answer.nonce) }));
      clearTimeout(timer);
      socket.off('error', onError);
      socket.off('close', onClose);
      resolve(authenticated(inflow, reader));
    });
    reader.chunksReused = inflow.chunksReused;
    inflow.feed((chunk) => {
      try {
        reader.push(chunk);
      } catch (e) {
        fail((e as Error).message);
      }
    });
    const onError = (e: Error): void => fail(e.message, e);
    const onClose = (): void =>
      fail('the listener closed the connection (it refused the handshake, or expects no link of this epoch)');
    socket.on('error', onError);
    socket.on('close', onClose);
    const hello = (): void => send(socket, encodeHandshake({ v: HANDSHAKE_VERSION, ...id, nonce, ...role }));
    if (!fingerprint) socket.once('connect', hello);
    else
      socket.once('secureConnect', () => {
        const served = (socket as TLSSocket).getPeerX509Certificate()?.fingerprint256;
        if (served !== fingerprint)
          return fail(`its TLS certificate (${served ?? 'none'}) is not the one it advertised (${fingerprint})`);
        hello();
      });
  });
}

/** A socket past its handshake: its reader, and messages it cut out behind the handshake before a link took it. */
export interface Authenticated {
  inflow: Inflow;
  reader: LengthPrefixedReader;
  arrived: Uint8Array[];
}

/** Hands an authenticated socket over: what arrives until a link takes it is kept, a broken frame destroys it. */
export function authenticated(inflow: Inflow, reader: LengthPrefixedReader): Authenticated {
  // Until a link takes the socket (the other direction may still be dialled), an error is seen as
  // its close, which follows it; unheard, it would end the process.
  inflow.socket.on('error', () => {});
  const arrived: Uint8Array[] = [];
  reader.handler = (m) => arrived.push(m);
  reader.maxBytes = MAX_MESSAGE_BYTES;
  inflow.feed((chunk) => {
    try {
      reader.push(chunk);
    } catch {
      inflow.socket.destroy();
    }
  });
  return { inflow, reader, arrived };
}

/** Rejects once `socket` closes (the far end gave up on the link before dialling back). */
export function closed(socket: Socket, id: LinkIdentity): Promise<never> {
  return new Promise((_, reject) =>
    socket.once('close', () => reject(transportError(`rank ${id.to} closed the link before dialling back`))),
  );
}

/** A dialled socket: plain TCP reads into one reused buffer; TLS by 'data' events. */
function openSocket(target: { host: string; port: number }, fingerprint?: string): Inflow {
  // Over TLS the certificate is nobody's CA's: it is checked against the fingerprint the listener relayed.
  if (fingerprint)
    return Inflow.ofDataEvents(
      tlsConnect({ host: target.host, port: target.port, rejectUnauthorized: false }).setNoDelay(true),
    );
  let inflow: Inflow | undefined;
  const own = new Uint8Array(READ_BUFFER_BYTES);
  const socket = createConnection({
    host: target.host,
    port: target.port,
    noDelay: true,
    onread: {
      // Each read goes where the link's reader says (most of a large message straight into the
      // buffer it is delivered in), else into the socket's own buffer.
      buffer: () => inflow?.readBuffer(own) ?? own,
      callback: (n, buffer) => {
        inflow!.push(buffer.subarray(0, n));
        return true;
      },
    },
  });
  inflow = new Inflow(socket, true);
  return inflow;
}

export function send(socket: Socket, message: Uint8Array): void {
  socket.cork();
  socket.write(lengthPrefix(message.byteLength));
  socket.write(message);
  socket.uncork();
}

export function transportError(message: string, cause?: unknown): RingtrainError {
  return new RingtrainError(ErrorCode.Transport, message, {}, cause === undefined ? undefined : { cause });
}

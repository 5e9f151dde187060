/**
 * TCP links for Node and Deno (`node:net` works in both): one listening
 * socket per process, which outlives membership epochs, and dialled
 * connections. Every connection proves the epoch's link key in both
 * directions (tcp-handshake.node.ts) before a single frame is read; a
 * connection that does not is refused, counted and logged.
 */
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { connect as tlsConnect, createServer as createTlsServer, type TLSSocket } from 'node:tls';
import type { LinkCertificate } from './link-cert.node.ts';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Link } from './link.ts';
import { LengthPrefixedReader, lengthPrefix } from './stream-frames.ts';
import { StreamLink } from './stream-link.node.ts';
import { joinHostPort, splitHostPort, type LinkIdentity, type TcpEndpoint } from './tcp-endpoint.ts';
import {
  answerSchema,
  encodeHandshake,
  HANDSHAKE_VERSION,
  helloSchema,
  MAX_HANDSHAKE_BYTES,
  newNonce,
  proofMatches,
  proofOf,
  proofSchema,
  readHandshake,
} from './tcp-handshake.node.ts';

/** A connection has this long to finish its handshake (ms): honest peers need one round trip. */
const HANDSHAKE_MS = 5000;
/** Handshakes in progress at once; a stranger opening more is refused at once rather than buffered. */
const MAX_PENDING_HANDSHAKES = 64;

export interface TcpListenOptions {
  /** Address to listen on (default 127.0.0.1). */
  host?: string;
  /** Port to listen on; 0 (default) picks a free one. */
  port?: number;
  /** What peers dial: "host" or "host:port" (default: the listening address). */
  advertise?: string;
  /** Where refusals are told (default console.warn). */
  log?: (line: string) => void;
  /** Serve TLS with this certificate (link-cert.node.ts): every incoming link is encrypted, and dialers pin its fingerprint. */
  tls?: LinkCertificate;
}

interface Expected {
  key: Uint8Array;
  resolve: (link: Link) => void;
  reject: (err: Error) => void;
}

const keyOf = (id: LinkIdentity): string => JSON.stringify([id.job, id.epoch, id.from, id.to]);

function transportError(message: string, cause?: unknown): RingtrainError {
  return new RingtrainError(ErrorCode.Transport, message, {}, cause === undefined ? undefined : { cause });
}

export class TcpLinkEndpoint implements TcpEndpoint {
  /** Connections refused because they did not prove the key (or spoke another protocol). */
  refused = 0;
  private expected = new Map<string, Expected>();
  private handshakes = 0;

  private constructor(
    private server: Server,
    readonly address: string,
    private log: (line: string) => void,
    readonly tlsFingerprint?: string,
  ) {
    if (!tlsFingerprint) {
      server.on('connection', (socket) => this.onIncoming(socket));
      return;
    }
    server.on('secureConnection', (socket: TLSSocket) => this.onIncoming(socket));
    // A stranger that cannot even finish TLS is refused like one without the key.
    server.on('tlsClientError', (e, socket) => {
      this.refused++;
      this.log(
        `refused a TCP link from ${socket.remoteAddress}:${socket.remotePort}: TLS failed (${e.message}) (${this.refused} refused so far)`,
      );
    });
  }

  /** Starts listening; resolves once the port is open. */
  static async listen(o: TcpListenOptions = {}): Promise<TcpLinkEndpoint> {
    const host = o.host ?? '127.0.0.1';
    const server = o.tls
      ? createTlsServer({ key: o.tls.key, cert: o.tls.cert, handshakeTimeout: HANDSHAKE_MS, noDelay: true })
      : createServer({ noDelay: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', (e) =>
        reject(
          new RingtrainError(
            ErrorCode.InvalidArgument,
            `cannot listen for TCP links on ${joinHostPort(host, o.port ?? 0)}: ${e.message}; pick another --listen address or port`,
          ),
        ),
      );
      server.listen(o.port ?? 0, host, () => resolve());
    });
    const port = (server.address() as { port: number }).port;
    return new TcpLinkEndpoint(
      server,
      advertisedAddress(host, port, o.advertise),
      o.log ?? ((line) => console.warn(`ringtrain: ${line}`)),
      o.tls?.fingerprint,
    );
  }

  accept(id: LinkIdentity, key: Uint8Array): { link: Promise<Link>; cancel(reason: Error): void } {
    const k = keyOf(id);
    let cancel!: (reason: Error) => void;
    const link = new Promise<Link>((resolve, reject) => {
      this.expected.set(k, { key, resolve, reject });
      cancel = (reason) => {
        if (this.expected.get(k)?.resolve !== resolve) return;
        this.expected.delete(k);
        reject(reason);
      };
    });
    // A cancelled accept nobody awaits any more must not surface as an unhandled rejection.
    link.catch(() => {});
    return { link, cancel };
  }

  dial(address: string, id: LinkIdentity, key: Uint8Array, timeoutMs: number, fingerprint?: string): Promise<Link> {
    const target = splitHostPort(address);
    if (!target) return Promise.reject(transportError(`rank ${id.to} advertised '${address}', which is not host:port`));
    return new Promise<Link>((resolve, reject) => {
      // Over TLS the certificate is nobody's CA's: it is checked against the fingerprint the listener relayed.
      const socket: Socket = fingerprint
        ? tlsConnect({ host: target.host, port: target.port, rejectUnauthorized: false }).setNoDelay(true)
        : createConnection({ host: target.host, port: target.port, noDelay: true });
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
        if (!proofMatches(answer.proof, proofOf(key, 'listener', id, nonce, answer.nonce)))
          return fail("the listener does not hold this epoch's link key (refused it)");
        send(socket, encodeHandshake({ proof: proofOf(key, 'dialer', id, nonce, answer.nonce) }));
        clearTimeout(timer);
        socket.off('data', onData);
        socket.off('error', onError);
        socket.off('close', onClose);
        resolve(new StreamLink(id.to, socket, reader));
      });
      const onData = (chunk: Uint8Array): void => {
        try {
          reader.push(chunk);
        } catch (e) {
          fail((e as Error).message);
        }
      };
      const onError = (e: Error): void => fail(e.message, e);
      const onClose = (): void =>
        fail('the listener closed the connection (it refused the handshake, or expects no link of this epoch)');
      socket.on('data', onData);
      socket.on('error', onError);
      socket.on('close', onClose);
      const hello = (): void =>
        send(
          socket,
          encodeHandshake({ v: HANDSHAKE_VERSION, job: id.job, epoch: id.epoch, from: id.from, to: id.to, nonce }),
        );
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

  /** Stops listening and refuses every link still expected; links already open stay up (their owners close them). */
  close(): void {
    for (const e of this.expected.values()) e.reject(transportError('the TCP listener closed'));
    this.expected.clear();
    this.server.close();
  }

  private onIncoming(socket: Socket): void {
    const from = `${socket.remoteAddress}:${socket.remotePort}`;
    let settled = false;
    const refuse = (why: string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      this.handshakes--;
      this.refused++;
      this.log(`refused a TCP link from ${from}: ${why} (${this.refused} refused so far)`);
    };
    if (this.handshakes >= MAX_PENDING_HANDSHAKES) {
      socket.destroy();
      this.refused++;
      this.log(
        `refused a TCP link from ${from}: ${MAX_PENDING_HANDSHAKES} handshakes already in progress (${this.refused} refused so far)`,
      );
      return;
    }
    this.handshakes++;
    const timer = setTimeout(() => refuse(`no handshake within ${HANDSHAKE_MS} ms`), HANDSHAKE_MS);
    let stage: { id: LinkIdentity; nonce: string; dialerNonce: string; expected: Expected } | null = null;
    const reader = new LengthPrefixedReader(MAX_HANDSHAKE_BYTES, (bytes) => {
      if (!stage) {
        const hello = readHandshake(bytes, helloSchema);
        if (!hello) return refuse('its first message is not a ringtrain link hello');
        const id: LinkIdentity = { job: hello.job, epoch: hello.epoch, from: hello.from, to: hello.to };
        const expected = this.expected.get(keyOf(id));
        if (!expected)
          return refuse(
            `no link from rank ${id.from} to rank ${id.to} of epoch ${id.epoch} of job '${id.job}' is expected here`,
          );
        stage = { id, nonce: newNonce(), dialerNonce: hello.nonce, expected };
        send(
          socket,
          encodeHandshake({
            nonce: stage.nonce,
            proof: proofOf(expected.key, 'listener', id, hello.nonce, stage.nonce),
          }),
        );
        return;
      }
      const proof = readHandshake(bytes, proofSchema);
      const { id, expected } = stage;
      if (!proof || !proofMatches(proof.proof, proofOf(expected.key, 'dialer', id, stage.dialerNonce, stage.nonce)))
        return refuse(`it claimed to be rank ${id.from} of epoch ${id.epoch} but does not hold the epoch's link key`);
      // The accept may have been cancelled (the mesh gave up) while this handshake ran.
      if (this.expected.get(keyOf(id)) !== expected)
        return refuse(`the link from rank ${id.from} of epoch ${id.epoch} is no longer expected`);
      this.expected.delete(keyOf(id));
      settled = true;
      clearTimeout(timer);
      this.handshakes--;
      socket.off('data', onData);
      socket.off('error', onError);
      expected.resolve(new StreamLink(id.from, socket, reader));
    });
    const onData = (chunk: Uint8Array): void => {
      try {
        reader.push(chunk);
      } catch (e) {
        refuse((e as Error).message);
      }
    };
    const onError = (e: Error): void => refuse(`socket error: ${e.message}`);
    socket.setNoDelay(true);
    socket.on('data', onData);
    socket.on('error', onError);
    socket.once('close', () => refuse('it closed during the handshake'));
  }
}

function send(socket: Socket, message: Uint8Array): void {
  socket.cork();
  socket.write(lengthPrefix(message.byteLength));
  socket.write(message);
  socket.uncork();
}

/** What peers dial: --advertise (a host, or host:port), else the listening address, which must then be one they can reach. */
function advertisedAddress(host: string, port: number, advertise: string | undefined): string {
  if (advertise !== undefined) {
    if (splitHostPort(advertise)) return advertise;
    if (/^[^\s/]+$/.test(advertise)) return joinHostPort(advertise, port);
    throw new RingtrainError(ErrorCode.InvalidArgument, `--advertise '${advertise}' is neither a host nor host:port`);
  }
  if (host === '0.0.0.0' || host === '::') {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `listening on ${host} (every interface) needs --advertise ADDR: the address the other peers reach this one at`,
    );
  }
  return joinHostPort(host, port);
}

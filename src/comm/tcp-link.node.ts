/**
 * TCP links for Node and Deno (`node:net` works in both): one listening
 * socket per process, which outlives membership epochs, and dialled
 * connections. Every connection proves the epoch's link key in both
 * directions (tcp-handshake.node.ts) before a single frame is read; a
 * connection that does not is refused, counted and logged.
 *
 * A plain TCP link is two connections, one per direction, each dialled by the
 * end that reads it (tcp-dial.node.ts), so every received byte is read where
 * the link's reader says (`onread`; Node gives an accepted socket no such
 * option): the lower rank dials the higher one's listener and says where to
 * dial back; the higher rank, once it has checked the lower's proof, dials back
 * with a handshake of its own. A TLS link is one connection.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import type { LinkCertificate } from './link-cert.node.ts';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Link } from './link.ts';
import { LengthPrefixedReader } from './stream-frames.ts';
import { Inflow, StreamLink } from './stream-link.node.ts';
import { authenticated, closed, dialAuthenticated, send, transportError, type Authenticated } from './tcp-dial.node.ts';
import { joinHostPort, splitHostPort, type LinkIdentity, type TcpEndpoint } from './tcp-endpoint.ts';
import {
  encodeHandshake,
  helloSchema,
  type Hello,
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

/** A connection back that a dial waits for (the other direction of a plain TCP link). */
interface ExpectedBack {
  key: Uint8Array;
  resolve: (socket: Authenticated) => void;
}

/** A connection whose hello was answered: what its proof is checked against. */
interface Stage {
  id: LinkIdentity;
  hello: Hello;
  nonce: string;
  expected: Expected | ExpectedBack;
}

const keyOf = (id: LinkIdentity): string => JSON.stringify([id.job, id.epoch, id.from, id.to]);

export class TcpLinkEndpoint implements TcpEndpoint {
  /** Connections refused because they did not prove the key (or spoke another protocol). */
  refused = 0;
  private expected = new Map<string, Expected>();
  private backs = new Map<string, ExpectedBack>();
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

  async dial(
    address: string,
    id: LinkIdentity,
    key: Uint8Array,
    timeoutMs: number,
    fingerprint?: string,
  ): Promise<Link> {
    if (fingerprint) {
      const socket = await dialAuthenticated(address, id, key, timeoutMs, {}, fingerprint);
      return new StreamLink(id.to, { read: socket.inflow }, socket.reader, socket.arrived);
    }
    // The listener dials back for the other direction once it has checked our proof: expected from now.
    const back = this.expectBack({ ...id, from: id.to, to: id.from }, key, timeoutMs);
    try {
      const read = await dialAuthenticated(address, id, key, timeoutMs, { back: this.address });
      const write = await Promise.race([back.socket, closed(read.inflow.socket, id)]).catch((e: unknown) => {
        read.inflow.socket.destroy();
        throw e;
      });
      return new StreamLink(id.to, { read: read.inflow, write: write.inflow }, read.reader, read.arrived);
    } finally {
      back.cancel();
    }
  }

  /** Waits for rank `id.from` to dial back the other direction of a link this end dialled. */
  private expectBack(
    id: LinkIdentity,
    key: Uint8Array,
    timeoutMs: number,
  ): { socket: Promise<Authenticated>; cancel(): void } {
    const k = keyOf(id);
    let cancel!: () => void;
    const socket = new Promise<Authenticated>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(transportError(`rank ${id.from} did not dial back within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const entry: ExpectedBack = {
        key,
        resolve: (a) => {
          settle();
          resolve(a);
        },
      };
      const settle = (): void => {
        clearTimeout(timer);
        if (this.backs.get(k) === entry) this.backs.delete(k);
      };
      this.backs.set(k, entry);
      cancel = settle;
    });
    socket.catch(() => {});
    return { socket, cancel };
  }

  /** Stops listening and refuses every link still expected; links already open stay up (their owners close them). */
  close(): void {
    for (const e of this.expected.values()) e.reject(transportError('the TCP listener closed'));
    this.expected.clear();
    this.server.close();
  }

  private onIncoming(socket: Socket): void {
    const from = `${socket.remoteAddress}:${socket.remotePort}`;
    if (this.handshakes >= MAX_PENDING_HANDSHAKES) {
      socket.destroy();
      this.refused++;
      this.log(
        `refused a TCP link from ${from}: ${MAX_PENDING_HANDSHAKES} handshakes already in progress (${this.refused} refused so far)`,
      );
      return;
    }
    this.handshakes++;
    let settled = false;
    const settle = (): boolean => {
      if (settled) return false;
      settled = true;
      clearTimeout(timer);
      this.handshakes--;
      return true;
    };
    const refuse = (why: string): void => {
      if (!settle()) return;
      socket.destroy();
      this.refused++;
      this.log(`refused a TCP link from ${from}: ${why} (${this.refused} refused so far)`);
    };
    const timer = setTimeout(() => refuse(`no handshake within ${HANDSHAKE_MS} ms`), HANDSHAKE_MS);
    const inflow = Inflow.ofDataEvents(socket);
    let stage: Stage | null = null;
    const reader = new LengthPrefixedReader(MAX_HANDSHAKE_BYTES, (bytes) => {
      if (!stage) {
        stage = this.answerHello(socket, bytes, refuse);
        return;
      }
      const proof = readHandshake(bytes, proofSchema);
      const { id, hello, expected } = stage;
      if (!proof || !proofMatches(proof.proof, proofOf(expected.key, 'dialer', id, hello, hello.nonce, stage.nonce)))
        return refuse(`it claimed to be rank ${id.from} of epoch ${id.epoch} but does not hold the epoch's link key`);
      // The accept may have been cancelled (the mesh gave up) while this handshake ran.
      if (this.expectedFor(hello) !== expected)
        return refuse(`the link from rank ${id.from} of epoch ${id.epoch} is no longer expected`);
      settle();
      socket.off('error', onError);
      this.proven(stage, authenticated(inflow, reader));
    });
    inflow.feed((chunk) => {
      try {
        reader.push(chunk);
      } catch (e) {
        refuse((e as Error).message);
      }
    });
    const onError = (e: Error): void => refuse(`socket error: ${e.message}`);
    socket.setNoDelay(true);
    socket.on('error', onError);
    socket.once('close', () => refuse('it closed during the handshake'));
  }

  /** Who a hello says it is, and the accept (or dial-back) waiting for it: back connections are kept apart. */
  private expectedFor(hello: Hello): Expected | ExpectedBack | undefined {
    const k = keyOf(hello);
    return hello.reverse ? this.backs.get(k) : this.expected.get(k);
  }

  /** Answers a dialler's hello with this end's proof; the stage to check its proof against, or null (refused). */
  private answerHello(socket: Socket, bytes: Uint8Array, refuse: (why: string) => void): Stage | null {
    const hello = readHandshake(bytes, helloSchema);
    if (!hello) {
      refuse('its first message is not a ringtrain link hello');
      return null;
    }
    const id: LinkIdentity = { job: hello.job, epoch: hello.epoch, from: hello.from, to: hello.to };
    const expected = this.expectedFor(hello);
    if (!expected) {
      const what = hello.reverse ? 'connection back' : 'link';
      refuse(
        `no ${what} from rank ${id.from} to rank ${id.to} of epoch ${id.epoch} of job '${id.job}' is expected here`,
      );
      return null;
    }
    const nonce = newNonce();
    send(socket, encodeHandshake({ nonce, proof: proofOf(expected.key, 'listener', id, hello, hello.nonce, nonce) }));
    return { id, hello, nonce, expected };
  }

  /** A dialler proved the key on `socket`: it is a connection back, a whole TLS link, or half a TCP link. */
  private proven(stage: Stage, socket: Authenticated): void {
    const { id, hello, expected } = stage;
    if (hello.reverse) return (expected as ExpectedBack).resolve(socket);
    const accept = expected as Expected;
    if (hello.back === undefined) {
      this.expected.delete(keyOf(id));
      return accept.resolve(new StreamLink(id.from, { read: socket.inflow }, socket.reader, socket.arrived));
    }
    // This end reads what the dialler sends on a socket of its own: it dials back.
    const back = { ...id, from: id.to, to: id.from };
    dialAuthenticated(hello.back, back, accept.key, HANDSHAKE_MS, { reverse: true }).then(
      (read) => {
        if (this.expected.get(keyOf(id)) !== accept) {
          read.inflow.socket.destroy();
          socket.inflow.socket.destroy();
          return;
        }
        this.expected.delete(keyOf(id));
        accept.resolve(new StreamLink(id.from, { read: read.inflow, write: socket.inflow }, read.reader, read.arrived));
      },
      (e: Error) => {
        // The accept stays expected: the dialler gives up on its side and the mesh falls back.
        socket.inflow.socket.destroy();
        this.log(`dropped a TCP link from rank ${id.from}: could not dial back to ${hello.back} (${e.message})`);
      },
    );
  }
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

/**
 * A full mesh of links, each pair on the best transport both ends have.
 * Every rank first tells every other whether it listens for TCP links (a
 * hello, link-choice.ts). When both ends of a pair do, the lower rank dials
 * the higher one's address and both prove the epoch's link key; a dial that
 * fails (no route, refused, too slow, a wrong key) makes the lower rank say
 * so and both open a WebRTC data channel instead, as do pairs where either
 * end is a browser tab, or where one end serves TLS (`--link-tls`) and the
 * other does not. The lower rank decides, so both ends always agree.
 * The layers above get `Link`s either way and never learn which is which.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { ChoiceSplitter, helloAddress, helloFingerprint, type LinkChoice } from './link-choice.ts';
import type { Link } from './link.ts';
import type { TcpEndpoint } from './tcp-endpoint.ts';
import { connectMesh, type ConnectOptions } from './webrtc-link.ts';

/** How long the lower rank tries a TCP link before both fall back to WebRTC (ms): a connect plus one handshake round trip, with room for a busy peer. */
export const DEFAULT_DIAL_TIMEOUT_MS = 10_000;

export interface TcpLinkOptions {
  endpoint: TcpEndpoint;
  job: string;
  epoch: number;
  /** The epoch's link key (the server's, in the membership): both ends of a TCP link prove they hold it. */
  key: Uint8Array;
  /** See DEFAULT_DIAL_TIMEOUT_MS. */
  dialTimeoutMs?: number;
}

export interface MeshOptions extends ConnectOptions {
  /** TCP links where the other end listens too; absent (a page, or `--transport webrtc`): WebRTC only. */
  tcp?: TcpLinkOptions;
  /** Told when a TCP link failed and the pair falls back to WebRTC. */
  onNotice?: (line: string) => void;
}

/** One pair's choices as they arrive: the other rank's hello, and (from a lower rank) its fallback. */
interface PairChoices {
  hello: Promise<LinkChoice>;
  fallback: Promise<void>;
  /** Whether its hello has come: a timeout names every rank still silent, not just the first. */
  helloCame: boolean;
  heard(c: LinkChoice): void;
}

function pairChoices(): PairChoices {
  let onHello!: (c: LinkChoice) => void;
  let onFallback!: () => void;
  const hello = new Promise<LinkChoice>((r) => (onHello = r));
  const fallback = new Promise<void>((r) => (onFallback = r));
  const pair: PairChoices = {
    hello,
    fallback,
    helloCame: false,
    heard: (c) => {
      if (c.ringtrainLink !== 'hello') return onFallback();
      pair.helloCame = true;
      onHello(c);
    },
  };
  return pair;
}

/** The abort's reason as the error a caller of the mesh gets: ERR_ABORTED naming the reason, unless it already has a code. */
function abortError(reason: unknown): RingtrainError {
  return reason instanceof RingtrainError
    ? reason
    : new RingtrainError(
        ErrorCode.Aborted,
        `stopped opening links: ${reason instanceof Error ? reason.message : String(reason)}`,
      );
}

/** Rejects when `signal` aborts or after `ms`, with the error `late` makes. */
function bounded<T>(p: Promise<T>, signal: AbortSignal, ms: number, late: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(late()), ms);
    const onAbort = (): void => reject(abortError(signal.reason));
    if (signal.aborted) onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    });
  });
}

/** What every pair's attempt shares while the mesh opens. */
interface MeshAttempt {
  o: MeshOptions;
  pairs: Map<number, PairChoices>;
  /** The TCP links this rank expects from lower ranks, accepted before its hello went out. */
  accepts: Map<number, ReturnType<TcpEndpoint['accept']>>;
  /** This rank's TLS fingerprint, when it serves TCP links over TLS. */
  fingerprint: string | undefined;
  stop: AbortController;
  timeoutMs: number;
  silentMs: number;
  webrtc(p: number): Promise<Link>;
}

/** Opens a link to every other rank; rejects (closing what opened) if any pair fails. */
export async function connectLinks(o: MeshOptions): Promise<Map<number, Link>> {
  const timeoutMs = o.timeoutMs ?? 30_000;
  const stop = new AbortController();
  const onOuterAbort = (): void => stop.abort(o.abort!.reason);
  if (o.abort?.aborted) onOuterAbort();
  o.abort?.addEventListener('abort', onOuterAbort, { once: true });
  const pairs = new Map<number, PairChoices>();
  for (let p = 0; p < o.size; p++) if (p !== o.rank) pairs.set(p, pairChoices());
  const split = new ChoiceSplitter(o.signaler, (from, c) => pairs.get(from)?.heard(c));
  const attempt: MeshAttempt = {
    o,
    pairs,
    ...sayHello(o, pairs),
    stop,
    timeoutMs,
    silentMs: Math.max(timeoutMs, o.silentTimeoutMs ?? timeoutMs),
    webrtc: (p) => connectMesh({ ...o, peers: [p], signaler: split.webrtc, abort: stop.signal }).then((m) => m.get(p)!),
  };
  const links = new Map<number, Link>();
  try {
    await Promise.all(
      [...pairs.keys()].map((p) =>
        linkTo(attempt, p).then(
          // A dial that completes after another pair failed is not kept.
          (link) => (stop.signal.aborted ? link.close() : void links.set(p, link)),
          (err: unknown) => {
            stop.abort(err);
            throw err;
          },
        ),
      ),
    );
  } catch (err) {
    for (const l of links.values()) l.close();
    for (const a of attempt.accepts.values()) a.cancel(new RingtrainError(ErrorCode.Aborted, 'the mesh failed'));
    split.close();
    throw err;
  } finally {
    o.abort?.removeEventListener('abort', onOuterAbort);
  }
  split.closeWhenIdle();
  return links;
}

/** Tells every other rank where it listens for TCP links, having first expected the lower ranks' dials (a fast peer may dial at once). */
function sayHello(o: MeshOptions, pairs: Map<number, PairChoices>): Pick<MeshAttempt, 'accepts' | 'fingerprint'> {
  const tcp = o.tcp;
  const accepts: MeshAttempt['accepts'] = new Map();
  if (tcp)
    for (const p of pairs.keys())
      if (p < o.rank)
        accepts.set(p, tcp.endpoint.accept({ job: tcp.job, epoch: tcp.epoch, from: p, to: o.rank }, tcp.key));
  const fingerprint = tcp?.endpoint.tlsFingerprint;
  for (const p of pairs.keys())
    o.signaler.send(p, {
      ringtrainLink: 'hello',
      ...(tcp ? { tcp: tcp.endpoint.address } : {}),
      ...(fingerprint ? { tls: fingerprint } : {}),
    } satisfies LinkChoice);
  return { accepts, fingerprint };
}

/** The link to rank `p`: TCP where both ends listen (and agree on TLS), else WebRTC. */
async function linkTo(m: MeshAttempt, p: number): Promise<Link> {
  const { o, stop } = m;
  const silent = () => {
    const waitingFor = [...m.pairs].filter(([, c]) => !c.helloCame).map(([q]) => q);
    return new RingtrainError(
      ErrorCode.Timeout,
      `rank ${o.rank} could not open a link to rank(s) ${waitingFor.join(', ')}: no signal from them within ${Math.round(m.silentMs)} ms; are they running and using the same signaling?`,
      { waitingFor, rank: o.rank },
    );
  };
  const hello = await bounded(m.pairs.get(p)!.hello, stop.signal, m.silentMs, silent);
  const address = helloAddress(hello);
  // TLS on one end only: the pair takes WebRTC (encrypted), never a plain link one end refused.
  if (!o.tcp || address === undefined || (helloFingerprint(hello) === undefined) !== (m.fingerprint === undefined))
    return m.webrtc(p);
  return o.rank < p ? dialTcp(m, o.tcp, p, address, helloFingerprint(hello)) : acceptTcp(m, p);
}

/** The lower rank's side: dial, and on failure tell the other rank to open WebRTC with it instead. */
async function dialTcp(
  m: MeshAttempt,
  tcp: TcpLinkOptions,
  p: number,
  address: string,
  tls: string | undefined,
): Promise<Link> {
  const id = { job: tcp.job, epoch: tcp.epoch, from: m.o.rank, to: p };
  try {
    return await tcp.endpoint.dial(address, id, tcp.key, tcp.dialTimeoutMs ?? DEFAULT_DIAL_TIMEOUT_MS, tls);
  } catch (e) {
    if (m.stop.signal.aborted) throw e;
    m.o.onNotice?.(`no TCP link to rank ${p} (${(e as Error).message}); using WebRTC for it`);
    m.o.signaler.send(p, { ringtrainLink: 'webrtc' } satisfies LinkChoice);
    return m.webrtc(p);
  }
}

/** The higher rank's side: the lower rank decides, so it dials us, or tells us to use WebRTC. */
async function acceptTcp(m: MeshAttempt, p: number): Promise<Link> {
  const accept = m.accepts.get(p)!;
  const late = () =>
    new RingtrainError(
      ErrorCode.Transport,
      `rank ${p} neither opened its TCP link to rank ${m.o.rank} nor fell back to WebRTC within ${Math.round(m.timeoutMs)} ms`,
      { peer: p, rank: m.o.rank },
    );
  const fallback = m.pairs.get(p)!.fallback.then(() => null);
  const chosen = await bounded(Promise.race([accept.link, fallback]), m.stop.signal, m.timeoutMs, late);
  if (chosen) return chosen;
  accept.cancel(new RingtrainError(ErrorCode.Aborted, `rank ${p} chose WebRTC`));
  return m.webrtc(p);
}

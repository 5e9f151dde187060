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

/** Opens a link to every other rank; rejects (closing what opened) if any pair fails. */
export async function connectLinks(o: MeshOptions): Promise<Map<number, Link>> {
  const timeoutMs = o.timeoutMs ?? 30_000;
  const silentMs = Math.max(timeoutMs, o.silentTimeoutMs ?? timeoutMs);
  const stop = new AbortController();
  const onOuterAbort = (): void => stop.abort(o.abort!.reason);
  if (o.abort?.aborted) onOuterAbort();
  o.abort?.addEventListener('abort', onOuterAbort, { once: true });
  const pairs = new Map<number, PairChoices>();
  for (let p = 0; p < o.size; p++) if (p !== o.rank) pairs.set(p, pairChoices());
  const split = new ChoiceSplitter(o.signaler, (from, c) => pairs.get(from)?.heard(c));
  const tcp = o.tcp;
  // Expect the lower ranks' dials before saying where to dial: a fast peer may dial at once.
  const accepts = new Map<number, ReturnType<TcpEndpoint['accept']>>();
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

  const links = new Map<number, Link>();
  const webrtc = (p: number): Promise<Link> =>
    connectMesh({ ...o, peers: [p], signaler: split.webrtc, abort: stop.signal }).then((m) => m.get(p)!);
  const linkTo = async (p: number): Promise<Link> => {
    const choices = pairs.get(p)!;
    const silent = () => {
      const waitingFor = [...pairs].filter(([, c]) => !c.helloCame).map(([q]) => q);
      return new RingtrainError(
        ErrorCode.Timeout,
        `rank ${o.rank} could not open a link to rank(s) ${waitingFor.join(', ')}: no signal from them within ${Math.round(silentMs)} ms; are they running and using the same signaling?`,
        { waitingFor, rank: o.rank },
      );
    };
    const hello = await bounded(choices.hello, stop.signal, silentMs, silent);
    const address = helloAddress(hello);
    // TLS on one end only: the pair takes WebRTC (encrypted), never a plain link one end refused.
    if (!tcp || address === undefined || (helloFingerprint(hello) === undefined) !== (fingerprint === undefined))
      return webrtc(p);
    const id = { job: tcp.job, epoch: tcp.epoch, from: Math.min(o.rank, p), to: Math.max(o.rank, p) };
    if (o.rank < p) {
      try {
        return await tcp.endpoint.dial(
          address,
          id,
          tcp.key,
          tcp.dialTimeoutMs ?? DEFAULT_DIAL_TIMEOUT_MS,
          helloFingerprint(hello),
        );
      } catch (e) {
        if (stop.signal.aborted) throw e;
        o.onNotice?.(`no TCP link to rank ${p} (${(e as Error).message}); using WebRTC for it`);
        o.signaler.send(p, { ringtrainLink: 'webrtc' } satisfies LinkChoice);
        return webrtc(p);
      }
    }
    // The lower rank decides: it dials us, or tells us to use WebRTC.
    const accept = accepts.get(p)!;
    const late = () =>
      new RingtrainError(
        ErrorCode.Transport,
        `rank ${p} neither opened its TCP link to rank ${o.rank} nor fell back to WebRTC within ${Math.round(timeoutMs)} ms`,
        { peer: p, rank: o.rank },
      );
    const chosen = await bounded(
      Promise.race([accept.link, choices.fallback.then(() => null)]),
      stop.signal,
      timeoutMs,
      late,
    );
    if (chosen) return chosen;
    accept.cancel(new RingtrainError(ErrorCode.Aborted, `rank ${p} chose WebRTC`));
    return webrtc(p);
  };
  try {
    await Promise.all(
      [...pairs.keys()].map((p) =>
        linkTo(p).then(
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
    for (const a of accepts.values()) a.cancel(new RingtrainError(ErrorCode.Aborted, 'the mesh failed'));
    split.close();
    throw err;
  } finally {
    o.abort?.removeEventListener('abort', onOuterAbort);
  }
  split.closeWhenIdle();
  return links;
}

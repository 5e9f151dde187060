/**
 * A Link that behaves like a long, thin pipe, for benchmarks of training over
 * the internet on one machine. This kernel has no `netem`, so delay cannot be
 * added to packets; instead this wrapper holds each message for `delayMs`
 * (one way) before handing it to the real link, in order. With `rateBitsPerS`
 * it also paces messages to that rate (a token bucket of one message), for
 * transports that no `tc tbf` can shape (memory links).
 *
 * What it is not: the real transport underneath still sees a short round trip,
 * so SCTP's window limits on a long pipe are not reproduced; the collectives
 * see the latency and the bandwidth, which is what the training modes differ in.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Link } from './link.ts';

export interface LinkEmulation {
  /** One-way delay added to every message (ms). */
  delayMs: number;
  /** Pace sends to this many bits per second (absent: as fast as the link goes). */
  rateBitsPerS?: number;
}

/** Reads "delay=50ms,rate=10mbit" (either part optional); throws InvalidArgument naming what was wrong. */
export function parseLinkEmulation(text: string): LinkEmulation {
  const out: LinkEmulation = { delayMs: 0 };
  for (const part of text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const delay = /^delay=(\d+(?:\.\d+)?)(ms)?$/i.exec(part);
    const rate = /^rate=(\d+(?:\.\d+)?)([kmg]?)(bit|bps)?$/i.exec(part);
    if (delay) out.delayMs = Number(delay[1]);
    else if (rate)
      out.rateBitsPerS =
        Number(rate[1]) * { '': 1, k: 1e3, m: 1e6, g: 1e9 }[rate[2].toLowerCase() as '' | 'k' | 'm' | 'g'];
    else
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `cannot read link emulation '${part}'; write e.g. delay=50ms,rate=10mbit`,
      );
  }
  if (out.rateBitsPerS !== undefined && !(out.rateBitsPerS > 0))
    throw new RingtrainError(ErrorCode.InvalidArgument, `link emulation rate must be > 0, got '${text}'`);
  return out;
}

/** Wraps `link`: sends arrive `delayMs` later (and no faster than the rate); receiving is untouched. */
export function emulateLink(link: Link, e: LinkEmulation): Link {
  const queue: { at: number; message: Uint8Array }[] = [];
  let queuedBytes = 0;
  let nextFree = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let closed = false;

  const pump = (): void => {
    timer = undefined;
    const t = performance.now();
    while (queue.length > 0 && queue[0].at <= t) {
      const { message } = queue.shift()!;
      queuedBytes -= message.byteLength;
      try {
        link.send(message);
      } catch {
        // The link went down meanwhile: its onClose tells the communicator.
        queue.length = 0;
        queuedBytes = 0;
        return;
      }
    }
    if (queue.length > 0) timer = setTimeout(pump, Math.max(0, queue[0].at - t));
  };

  return {
    peer: link.peer,
    send(message: Uint8Array): void {
      if (closed) throw new RingtrainError(ErrorCode.Transport, `link to rank ${link.peer} is closed`);
      const t = performance.now();
      // Pacing: this message leaves when the previous one has, plus its own transmission time.
      const leaves = e.rateBitsPerS ? Math.max(t, nextFree) + (message.byteLength * 8 * 1000) / e.rateBitsPerS : t;
      nextFree = leaves;
      // The caller may reuse its buffer once send returns: keep a copy.
      queue.push({ at: leaves + e.delayMs, message: message.slice() });
      queuedBytes += message.byteLength;
      if (timer === undefined) timer = setTimeout(pump, Math.max(0, queue[0].at - t));
    },
    // Held messages count as buffered, so the communicator's backpressure sees the thin pipe.
    bufferedAmount: () => queuedBytes + link.bufferedAmount(),
    onMessage: (handler) => link.onMessage(handler),
    onClose: (handler) => link.onClose(handler),
    close(): void {
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      queue.length = 0;
      queuedBytes = 0;
      link.close();
    },
  };
}

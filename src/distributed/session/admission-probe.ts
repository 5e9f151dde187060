/**
 * This peer's end of an admission probe (src/signaling/protocol.ts, "Staged admission"): a real
 * link to one other peer, on the transport the ring would use for that pair (TCP between native
 * peers, else WebRTC: src/comm/mesh.ts), and one echo over it. The member end (side 0) sends a
 * random nonce and, when the same bytes come back, tells the server `probe-ok`; the candidate end
 * (side 1) sends back what it gets. Either end gives up quietly at the deadline: a candidate that
 * never answers is the server's to drop, and the member's ring never waited for it.
 */
import { connectLinks } from '../../comm/mesh.ts';
import type { Link } from '../../comm/link.ts';
import type { TcpEndpoint } from '../../comm/tcp-endpoint.ts';
import type { SignalingClient } from '../../signaling/client.ts';
import type { ProbeMsg } from '../../signaling/protocol.ts';

/** Bytes of the member's nonce: enough that a candidate cannot echo without receiving it. */
const NONCE_BYTES = 16;

/** How a probe ended on this peer: `ok` once the echo went through, else why not. */
export interface ProbeOutcome {
  ok: boolean;
  reason?: string;
}

export interface ProbeOptions {
  /** RTCPeerConnection implementation for Node/Deno; the browser's own when omitted. */
  wrtc?: unknown;
  /** This peer's TCP listener (Node/Deno), used when the other end listens too. */
  tcp?: TcpEndpoint;
  /** How long the link and the echo may take, in all (the job's admitTimeoutMs). */
  deadlineMs: number;
  onNotice: (line: string) => void;
}

/** Opens probe `p`'s link and echoes over it; never throws (a failed probe only leaves the candidate out). */
export async function answerProbe(client: SignalingClient, p: ProbeMsg, o: ProbeOptions): Promise<ProbeOutcome> {
  const stop = new AbortController();
  const timer = setTimeout(() => stop.abort(new Error(`no echo within ${o.deadlineMs} ms`)), o.deadlineMs);
  let link: Link | undefined;
  try {
    const links = await connectLinks({
      rank: p.side,
      size: 2,
      signaler: client.probeSignaler(p),
      wrtc: o.wrtc,
      timeoutMs: o.deadlineMs,
      abort: stop.signal,
      ...client.ice,
      tcp: probeTcp(client, p, o.tcp),
      onNotice: o.onNotice,
    });
    link = links.get(1 - p.side)!;
    if (p.side === 0) {
      await sendAndHearEcho(link, stop.signal);
      client.probeOk(p.probe);
    } else {
      await echoOnce(link, stop.signal);
    }
    return { ok: true };
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    // The member end says so (a candidate that never answered shows here); the candidate end's server says why.
    if (p.side === 0) o.onNotice(`admission probe with joiner ${p.peer.name ?? p.peer.peerId} failed: ${reason}`);
    return { ok: false, reason };
  } finally {
    clearTimeout(timer);
    link?.close();
    client.endProbe(p.probe);
  }
}

/** The probe's TCP link: both ends native (the server then gave the probe a key of its own) and this one listening. */
function probeTcp(client: SignalingClient, p: ProbeMsg, endpoint: TcpEndpoint | undefined) {
  if (!endpoint || p.linkKey === undefined) return undefined;
  const key = Uint8Array.from(atob(p.linkKey), (c) => c.charCodeAt(0));
  // Its own job name: a probe's link is never taken for a link of the ring's epochs.
  return { endpoint, job: `${client.job.id}/probe/${p.probe}`, epoch: 0, key };
}

/** Resolves with the link's first message, or rejects when the link closes or `signal` aborts. */
function firstMessage(link: Link, signal: AbortSignal): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as Error);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    link.onMessage((m) => {
      signal.removeEventListener('abort', onAbort);
      resolve(m);
    });
    link.onClose((reason) => reject(reason ?? new Error('the other end closed the link before the echo')));
  });
}

async function sendAndHearEcho(link: Link, signal: AbortSignal): Promise<void> {
  const nonce = crypto.getRandomValues(new Uint8Array(NONCE_BYTES));
  const heard = firstMessage(link, signal);
  link.send(nonce);
  const echo = await heard;
  if (echo.length !== nonce.length || echo.some((b, i) => b !== nonce[i]))
    throw new Error('the joiner sent back other bytes than the nonce');
}

/** Sends back the first message, then waits for the member to close the link (so the echo is not cut off). */
async function echoOnce(link: Link, signal: AbortSignal): Promise<void> {
  link.send(await firstMessage(link, signal));
  await new Promise<void>((resolve) => {
    link.onClose(() => resolve());
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

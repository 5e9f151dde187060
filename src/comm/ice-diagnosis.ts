/**
 * Why a data channel never opened, in words a user can act on. When two
 * peers exchanged their addresses through the signaling server but ICE found
 * no path between them, the cause is nearly always the network (NATs,
 * firewalls), and the fix is a TURN relay: the error says so, naming the peer
 * and which candidates each side offered.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';

/** One STUN/TURN server as RTCPeerConnection takes it (the signaling protocol's `iceServers` entries fit). */
export interface IceServer {
  urls: string | string[];
  username?: string;
  credential?: string;
}

export type CandidateType = 'host' | 'srflx' | 'prflx' | 'relay';

/** What one link's ICE got up to while connecting. */
export interface IceProgress {
  /** The last iceConnectionState seen ('new' until one is). */
  state: string;
  /** Candidate types this side offered, and the other side offered. */
  local: Set<CandidateType>;
  remote: Set<CandidateType>;
  /** Whether any signal (offer, answer, candidate) came from the other side. */
  heard: boolean;
}

export function newIceProgress(): IceProgress {
  return { state: 'new', local: new Set(), remote: new Set(), heard: false };
}

/** Adds the candidate types named in a signal (a trickled candidate, or an SDP with a=candidate lines). */
export function noteCandidates(into: Set<CandidateType>, signal: unknown): void {
  let text: string;
  try {
    text = JSON.stringify(signal) ?? '';
  } catch {
    return;
  }
  for (const m of text.matchAll(/ typ (host|srflx|prflx|relay)\b/g)) into.add(m[1] as CandidateType);
}

function urlsOf(servers: IceServer[] | undefined): string[] {
  return (servers ?? []).flatMap((s) => (Array.isArray(s.urls) ? s.urls : [s.urls]));
}

const list = (s: Set<CandidateType>): string => (s.size ? [...s].join('+') : 'none');

/**
 * The error for a link from `rank` to `peer` that ICE could not open. `waitedMs`:
 * how long it tried (undefined when ICE itself reported failure).
 */
export function noPathError(
  rank: number,
  peer: number,
  p: IceProgress,
  iceServers: IceServer[] | undefined,
  waitedMs?: number,
  cause?: Error,
): RingtrainError {
  const turn = urlsOf(iceServers).filter((u) => /^turns?:/.test(u));
  const how = waitedMs === undefined ? 'ICE failed' : `ICE was still '${p.state}' after ${waitedMs} ms`;
  let hint: string;
  if (turn.length === 0) {
    hint =
      'Peers on different networks (behind NATs or firewalls) reach each other only through a relay: ' +
      "start the server with --turn turn:HOST:3478 --turn-secret-file FILE (coturn's static-auth-secret), " +
      "and --stun stun:HOST:3478; see the README, 'Across the internet'";
  } else if (!p.local.has('relay')) {
    hint =
      `the TURN server (${turn.join(', ')}) gave this peer no relay address: check that it is reachable from here, ` +
      "and that coturn's static-auth-secret is the one in the signaling server's --turn-secret-file";
  } else {
    hint =
      `not even through the TURN relay (${turn.join(', ')}): check that rank ${peer} reaches it too, ` +
      'and that coturn lets these peers relay (its denied-peer-ip / allowed-peer-ip lines)';
  }
  return new RingtrainError(
    ErrorCode.Transport,
    `rank ${rank} found no network path to rank ${peer}: ${how} (candidates: ours ${list(p.local)}, theirs ${list(p.remote)}). ${hint}.`,
    { rank, peer, iceState: p.state, local: [...p.local], remote: [...p.remote], turn },
    cause ? { cause } : undefined,
  );
}

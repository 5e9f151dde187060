/**
 * Ghost sockets against a running job (test/robust/sybil.test.ts, bench/ghosts.ts): each joins
 * with the job's token, answers the server's pings, vouches for every epoch and accuses a worker
 * if it ever gets a membership, and never opens a data channel or answers a probe. A ghost the
 * server drops joins again at once, so `count` of them stand for as long as the swarm runs.
 */
import { RawPeer } from '../server/helpers.ts';
import type { TestWorker } from './workers.ts';
import { joinMessage } from './signing-key.ts';

export interface GhostSwarm {
  /** Joins made, memberships the ghosts got (0 under staged admission), fatal errors by code. */
  readonly tally: { joins: number; memberships: number; refusals: Record<string, number> };
  /** Names of the ghosts that are or were in the job. */
  readonly names: Set<string>;
  /** Stops rejoining and closes every ghost. */
  stop(): void;
}

export function ghostSwarm(
  wsUrl: string,
  job: { id: string; token: string },
  count: number,
  victimName: string,
): GhostSwarm {
  let stopped = false;
  let next = 0;
  const open = new Set<RawPeer>();
  const swarm: GhostSwarm = {
    tally: { joins: 0, memberships: 0, refusals: {} },
    names: new Set(),
    stop: () => {
      stopped = true;
      for (const g of open) g.close();
    },
  };
  const haunt = async (): Promise<void> => {
    if (stopped) return;
    const name = `ghost-${next++}`;
    // A server that is closing refuses the socket: the swarm is over then.
    const g = await RawPeer.open(wsUrl).catch(() => null);
    if (!g) return;
    if (stopped) return g.close();
    open.add(g);
    swarm.names.add(name);
    g.ws.on('message', (data) => onGhostMessage(g, swarm, JSON.parse(String(data)), victimName));
    g.ws.on('close', () => {
      open.delete(g);
      void haunt();
    });
    g.sendJson(joinMessage({ job: job.id, token: job.token, name }));
    swarm.tally.joins++;
  };
  for (let i = 0; i < count; i++) void haunt();
  return swarm;
}

function onGhostMessage(
  g: RawPeer,
  swarm: GhostSwarm,
  m: { type: string; seq?: number; epoch?: number; code?: string; peers?: { peerId: string; name?: string }[] },
  victimName: string,
): void {
  if (m.type === 'ping') g.sendJson({ type: 'pong', seq: m.seq });
  if (m.type === 'error' && m.code) swarm.tally.refusals[m.code] = (swarm.tally.refusals[m.code] ?? 0) + 1;
  if (m.type === 'membership') {
    swarm.tally.memberships++;
    // Vouch for every epoch (the workers never do for one with a ghost in it) and accuse a worker.
    g.sendJson({ type: 'attest', epoch: m.epoch });
    const victim = m.peers?.find((p) => p.name === victimName);
    if (victim) g.sendJson({ type: 'report', peerId: victim.peerId, reason: 'it sent me garbage (a lie)' });
  }
}

/** Steps the slowest of `workers` took from now until `ms` later (a window of wall time). */
export async function stepsWithin(workers: TestWorker[], ms: number): Promise<number> {
  const at = () => Math.min(...workers.map((w) => w.steps[w.steps.length - 1]?.step ?? 0));
  const from = at();
  await new Promise((r) => setTimeout(r, ms));
  return at() - from;
}

/** What one worker's admission probes (its 'admission-probe' events, member end) did beside its steps. */
export interface ProbeTally {
  /** Probes it opened, and the candidates they were with (in order). */
  opened: number;
  peers: string[];
  /** Probes that ended without their echo, and those given up unopened (their deadline passed while they waited). */
  failed: number;
  skipped: number;
  /** The most probes it held open at once. */
  mostOpen: number;
  /** Steps it reported while at least one of its probes was open: the ring did not wait for them. */
  stepsWhileOpen: number;
}

/** Reads a worker's events in the order it printed them: structure only, no clocks. */
export function probeTally(w: TestWorker): ProbeTally {
  const open = new Set<unknown>();
  const tally: ProbeTally = { opened: 0, peers: [], failed: 0, skipped: 0, mostOpen: 0, stepsWhileOpen: 0 };
  for (const e of w.events) {
    if (e.event === 'step' && open.size > 0) tally.stepsWhileOpen++;
    if (e.event !== 'admission-probe' || e.side !== 0) continue;
    if (e.phase === 'begin') {
      open.add(e.probe);
      tally.opened++;
      tally.peers.push(String(e.peer));
      tally.mostOpen = Math.max(tally.mostOpen, open.size);
    } else if (open.delete(e.probe)) {
      if (e.ok !== true) tally.failed++;
    } else tally.skipped++;
  }
  return tally;
}

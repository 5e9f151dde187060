/**
 * Prometheus metrics of one server, in a registry of its own (two servers in
 * one process, as in tests, never share counters). Gauges that describe the
 * current state are computed when scraped; counters count as things happen.
 */
import { Counter, Gauge, Registry } from 'prom-client';
import type { Job } from './jobs.ts';

/** Message types counted by name; anything else is counted as 'other' (bounded label values). */
const KNOWN_TYPES = new Set([
  'join',
  'signal',
  'pong',
  'progress',
  'leave',
  'welcome',
  'membership',
  'peer-left',
  'ping',
  'error',
]);

/** Gauges of the server's state, computed when scraped: jobs, peers, epochs, signals, open sockets. */
function registerStateGauges(
  registers: Registry[],
  jobs: () => Iterable<Job>,
  openConnections: () => number,
  openHandshakes: () => number,
): void {
  new Gauge({
    name: 'ringtrain_jobs',
    help: 'Jobs this server knows.',
    registers,
    collect() {
      this.set([...jobs()].length);
    },
  });
  new Gauge({
    name: 'ringtrain_peers',
    help: 'Peers joined, per job.',
    labelNames: ['job'],
    registers,
    collect() {
      this.reset();
      for (const j of jobs()) this.set({ job: j.id }, j.size);
    },
  });
  new Gauge({
    name: 'ringtrain_membership_epoch',
    help: 'Current membership epoch, per job.',
    labelNames: ['job'],
    registers,
    collect() {
      this.reset();
      for (const j of jobs()) this.set({ job: j.id }, j.epoch);
    },
  });
  new Gauge({
    name: 'ringtrain_signals_relayed',
    help: 'Signals relayed between peers, per job, since the server started.',
    labelNames: ['job'],
    registers,
    collect() {
      this.reset();
      for (const j of jobs()) this.set({ job: j.id }, j.signalsRelayed);
    },
  });
  new Gauge({
    name: 'ringtrain_connections',
    help: 'Open WebSocket connections.',
    registers,
    collect() {
      this.set(openConnections());
    },
  });
  new Gauge({
    name: 'ringtrain_handshakes',
    help: 'WebSocket connections upgraded that have not joined a job yet.',
    registers,
    collect() {
      this.set(openHandshakes());
    },
  });
}

export class ServerMetrics {
  readonly registry = new Registry();
  private readonly messages: Counter<'direction' | 'type'>;
  private readonly errors: Counter<'code'>;
  private readonly peersLeft: Counter<'job' | 'reason'>;
  private readonly refusals: Counter<'reason'>;
  private readonly progressRefusals: Counter<'reason'>;
  readonly connectionsTotal: Counter;

  constructor(jobs: () => Iterable<Job>, openConnections: () => number, openHandshakes: () => number = () => 0) {
    const registers = [this.registry];
    registerStateGauges(registers, jobs, openConnections, openHandshakes);
    this.refusals = new Counter({
      name: 'ringtrain_refusals_total',
      help: 'Sockets refused or closed before joining, by reason (address-sockets, address-handshakes, evicted, join-timeout).',
      labelNames: ['reason'],
      registers,
    });
    this.progressRefusals = new Counter({
      name: 'ringtrain_progress_refused_total',
      help: 'Progress reports refused (not shown), by reason (invalid, step-backwards, beyond-last-step).',
      labelNames: ['reason'],
      registers,
    });
    this.connectionsTotal = new Counter({
      name: 'ringtrain_connections_total',
      help: 'WebSocket connections accepted.',
      registers,
    });
    this.messages = new Counter({
      name: 'ringtrain_messages_total',
      help: 'Signaling messages, by direction (in, out) and type.',
      labelNames: ['direction', 'type'],
      registers,
    });
    this.errors = new Counter({
      name: 'ringtrain_errors_total',
      help: 'Protocol errors, by code.',
      labelNames: ['code'],
      registers,
    });
    this.peersLeft = new Counter({
      name: 'ringtrain_peers_left_total',
      help: 'Peers that left a job, by job and reason.',
      labelNames: ['job', 'reason'],
      registers,
    });
  }

  message(direction: 'in' | 'out', type: string): void {
    this.messages.inc({ direction, type: KNOWN_TYPES.has(type) ? type : 'other' });
  }

  error(code: string): void {
    this.errors.inc({ code });
  }

  refused(reason: string): void {
    this.refusals.inc({ reason });
  }

  progressRefused(reason: string): void {
    this.progressRefusals.inc({ reason });
  }

  peerLeft(job: string, reason: string): void {
    this.peersLeft.inc({ job, reason });
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}

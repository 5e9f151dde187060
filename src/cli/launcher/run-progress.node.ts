/**
 * What `ringtrain run` makes of its workers' JSON lines while they train: the
 * progress bar (or about ten progress lines without one), which process holds
 * which rank, a ring that re-formed, stalls, departures and recovery
 * checkpoints. It only listens; the workers decide everything.
 */
import { Presets, SingleBar } from 'cli-progress';
import { FINISHED } from '../../distributed/session/session.ts';
import { stallReporter } from '../../distributed/observe/stall.ts';
import { printLine, stderr, stderrIsTTY } from '../host.node.ts';
import type { RunOptions } from '../options/run-options.node.ts';
import { evaluationText } from './run-summary.node.ts';
import type { WorkerState } from './run-workers.node.ts';

type Message = Record<string, unknown>;

/** The progress bar on a terminal (none with --json or a pipe). */
export function progressBar(o: RunOptions, totalSteps: number): SingleBar | undefined {
  if (o.json || !stderrIsTTY) return undefined;
  const bar = new SingleBar(
    {
      stream: stderr,
      format: '{bar} {value}/{total} steps | {sps} steps/s | loss {loss} | allreduce {mbps} MB/s',
      hideCursor: true,
    },
    Presets.shades_classic,
  );
  bar.start(totalSteps, 0, { sps: '-', loss: '-', mbps: '-' });
  return bar;
}

export class RunProgress {
  readonly workers: WorkerState[] = [];
  /** Why each local worker left, by its name (deno-2): the final report names who was lost or ejected. */
  readonly departures = new Map<string, string>();
  /** The newest recovery checkpoint a worker saved (ranks may stop a step apart, or on an error of their own). */
  recovery: { step: number; path: string; diverged?: boolean } | undefined;
  /** Evaluation lines held back while the bar is on screen. */
  readonly lastLines: string[] = [];
  private readonly started = Date.now();
  /** Every survivor hears of a departure: one line per peer that left, from whoever tells first. */
  private readonly departed = new Set<string>();
  private lastDeparture: { who: string; at: number } | undefined;
  private ringSize: number;
  private ringShown = false;
  /** Without a bar (a log, a pipe), about ten progress lines per run instead. */
  private readonly progressEvery: number;
  private lastProgressLine = 0;
  // Straight to stderr even with a bar on screen: a stalled ring is news now, not after the run.
  private readonly sayStall = stallReporter((line) => void this.notice(line));

  constructor(
    private readonly o: RunOptions,
    private readonly runtime: 'node' | 'deno',
    private readonly totalSteps: number,
    private readonly bar: SingleBar | undefined,
    private readonly say: (line: string) => Promise<void>,
  ) {
    this.ringSize = o.np;
    this.progressEvery = Math.max(1, Math.ceil(totalSteps / 10));
  }

  /** A line on stderr, below the bar when there is one. */
  notice(line: string): Promise<void> {
    return printLine(`${this.bar ? '\n' : ''}ringtrain: ${line}`, stderr);
  }

  readonly onLine = (w: WorkerState, msg: Message): void => {
    if (msg.event === 'joined') w.rank = Number(msg.rank);
    else if (msg.event === 'step') {
      w.rank = Number(msg.rank); // ranks move when an elastic ring re-forms
      w.training = true;
    }
    if (msg.event === 'joined') this.showRing();
    if (msg.event === 'step' && Number(msg.size) !== this.ringSize) this.reformed(msg);
    if (msg.event === 'step' && w.rank === 0) this.step(msg);
    else if (msg.event === 'evaluate' && w.rank === 0) {
      const line = `epoch ${Number(msg.epoch) + 1}: step ${msg.step}, ${evaluationText(this.o.model, Number(msg.testAccuracy), Number(msg.testLoss))}`;
      if (this.bar) this.lastLines.push(line);
      else void this.say(line);
    } else if (msg.event === 'stall') {
      // Every rank notices a silent peer: one line per stalled set of ranks, now and then.
      this.sayStall({
        rank: Number(msg.rank),
        name: String(msg.name),
        waitingFor: (msg.waitingFor as number[]) ?? [],
        waitedMs: Number(msg.waitedMs),
      });
    } else if (msg.event === 'peer-left') this.peerLeft(msg);
    else if (msg.event === 'checkpoint-notice') void this.notice(`rank ${Number(msg.rank)}: ${String(msg.line)}`);
    else if (msg.event === 'recovery') {
      if (!this.recovery || Number(msg.step) > this.recovery.step)
        this.recovery = { step: Number(msg.step), path: String(msg.path), diverged: msg.diverged === true };
    } else if (msg.event === 'result') w.result = msg;
  };

  /** Which process holds which rank, once every worker joined: what a person needs to read a stall or a lost rank. */
  private showRing(): void {
    const { workers, o } = this;
    if (this.ringShown || workers.length !== o.np || !workers.every((x) => x.rank !== undefined)) return;
    this.ringShown = true;
    const byRank = [...workers].sort((a, b) => a.rank! - b.rank!);
    void this.say(
      `ringtrain: ring of ${o.np}: ${byRank.map((x) => `rank ${x.rank} ${this.runtime}-${x.index} (pid ${x.child.pid})`).join(', ')}`,
    );
  }

  /** The first step of a re-formed ring: say so, and how long the ring was down. */
  private reformed(msg: Message): void {
    this.ringSize = Number(msg.size);
    const after = this.lastDeparture
      ? `, ${((Date.now() - this.lastDeparture.at) / 1000).toFixed(1)} s after ${this.lastDeparture.who} left`
      : '';
    this.lastDeparture = undefined;
    void this.notice(`the ring re-formed with ${this.ringSize} peers at step ${Number(msg.step)}${after}`);
  }

  /** Rank 0's step: the bar, or a progress line now and then. */
  private step(msg: Message): void {
    const step = Number(msg.step);
    const bytes = Number(msg.bytesSent);
    const secs = (Date.now() - this.started) / 1000;
    this.bar?.update(step, {
      sps: (step / secs).toFixed(2),
      loss: Number(msg.loss).toFixed(4),
      mbps: (bytes / 1e6 / secs).toFixed(2),
    });
    if (!this.bar && step >= this.lastProgressLine + this.progressEvery) {
      this.lastProgressLine = step - (step % this.progressEvery);
      void this.say(
        `step ${step}/${this.totalSteps} on ${Number(msg.size)} peers, loss ${Number(msg.loss).toFixed(4)}, ${(step / secs).toFixed(2)} steps/s`,
      );
    }
  }

  private peerLeft(msg: Message): void {
    // A peer that finished, or a server shutting down, is no news.
    const finished = msg.reason === 'left' && msg.detail === FINISHED;
    if (finished || msg.reason === 'server-closing' || this.departed.has(String(msg.peerId))) return;
    this.departed.add(String(msg.peerId));
    const who = `${msg.name ? String(msg.name) : `peer ${String(msg.peerId)}`} (rank ${Number(msg.rank)})`;
    this.lastDeparture ??= { who, at: Date.now() };
    const why = `${String(msg.reason)}${msg.detail ? `: ${String(msg.detail)}` : ''}`;
    if (msg.name) this.departures.set(String(msg.name), why);
    void this.notice(
      `${who} left the job (${why}); ${this.o.settings.elastic ? 'the others re-form the ring without it' : 'the ring stops'}`,
    );
  }
}

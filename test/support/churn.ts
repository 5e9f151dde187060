/**
 * Churn against an elastic job (issue 37's churn soak: bench/churn.ts, test/robust/churn.test.ts):
 * real Deno workers on a real server, and rounds of "SIGKILL one member, start a new worker".
 * The killed worker is the oldest one still alive that has trained (so the first members go
 * first, and ranks vary). A round starts on the cadence (`everyMs` after the previous one), or,
 * with `everyMs` 0, as soon as the previous joiner has trained a step in a full ring: what a
 * test waits on instead of a clock.
 */
import type { RunningServer } from '../../server/index.ts';
import type { JobSpec } from '../../src/signaling/protocol.ts';
import { seen, startDenoWorker, until, type TestWorker } from './workers.ts';

export type ChurnJob = JobSpec;

/** A 3-worker elastic MLP job that ends after `steps`: joiners are candidates until they prove themselves. */
export function churnJob(
  id: string,
  steps: number,
  size = 3,
  extra: Record<string, number | boolean | string> = {},
): ChurnJob {
  return {
    id,
    token: `${id}-token`,
    config: {
      model: 'mlp',
      optimizer: 'sgd',
      // One example per evaluation: the run is about membership, not accuracy.
      hyperparameters: { lr: 0.05, momentum: 0.9, seed: 11, steps, elastic: true, evalLimit: 1, ...extra },
      batchPerPeer: 32,
      minPeers: 2,
      startPeers: size,
      maxPeers: size + 2,
    },
  };
}

export interface ChurnWorker {
  name: string;
  worker: TestWorker;
  startedAt: number;
  killedAt?: number;
}

export interface ChurnRound {
  killed: string;
  /** The killed worker's last step before it died. */
  killed_after_step: number;
  joined: string;
  /** From the kill until every survivor trained a step in the smaller ring (null: it never did). */
  reform_after_kill_ms: number | null;
  /** From the joiner's start until its first step in a ring of the full size (null: never). */
  join_to_first_step_ms: number | null;
}

export class Churn {
  readonly workers: ChurnWorker[] = [];
  readonly rounds: ChurnRound[] = [];
  private started = 0;

  constructor(
    private readonly server: RunningServer,
    private readonly job: ChurnJob,
    private readonly size: number,
  ) {}

  /** Starts `size` workers and waits until they trained together in a full ring (so they vote). */
  async start(timeoutMs: number): Promise<void> {
    for (let i = 0; i < this.size; i++) this.spawn();
    await until(
      () =>
        this.alive().every((w) => w.worker.steps.some((s) => s.size === this.size)) &&
        (this.server.jobInfo(this.job.id)?.peers.filter((p) => p.voter).length ?? 0) === this.size,
      'the first ring to train',
      timeoutMs,
      () => this.seen(),
    );
  }

  /** Workers not killed (whether or not they exited on their own). */
  alive(): ChurnWorker[] {
    return this.workers.filter((w) => w.killedAt === undefined);
  }

  /** The survivors' exit codes, once all exited; fails with what was seen after `timeoutMs`. */
  async finish(timeoutMs: number): Promise<void> {
    await until(
      () => this.alive().every((w) => w.worker.child.exitCode !== null || w.worker.child.signalCode !== null),
      'the survivors to finish',
      timeoutMs,
      () => this.seen(),
    );
  }

  /**
   * One round: SIGKILLs the oldest alive worker that has trained and starts a new one at once.
   * Resolves when the joiner trained a step in a full ring, or `timeoutMs` after the kill.
   */
  async round(timeoutMs: number): Promise<ChurnRound> {
    const victim = this.alive().find((w) => w.worker.steps.length > 0);
    if (!victim) throw new Error(`churn: no trained worker left to kill${this.seen()}`);
    const killedAfter = victim.worker.steps.at(-1)!.step;
    victim.worker.child.kill('SIGKILL');
    victim.killedAt = Date.now();
    const survivors = this.alive();
    const joiner = this.spawn();
    const record: ChurnRound = {
      killed: victim.name,
      killed_after_step: killedAfter,
      joined: joiner.name,
      reform_after_kill_ms: null,
      join_to_first_step_ms: null,
    };
    this.rounds.push(record);
    const smaller = (w: ChurnWorker) => w.worker.steps.some((s) => s.step > killedAfter && s.size < this.size);
    const end = victim.killedAt + timeoutMs;
    await until(
      () => {
        if (record.reform_after_kill_ms === null && survivors.every(smaller))
          record.reform_after_kill_ms = Date.now() - victim.killedAt!;
        if (joiner.worker.steps.some((s) => s.size === this.size))
          record.join_to_first_step_ms = Date.now() - joiner.startedAt;
        return record.join_to_first_step_ms !== null || this.ended() || Date.now() > end;
      },
      `round ${this.rounds.length}`,
      timeoutMs + 1000,
    );
    return record;
  }

  /** Whether the job is over: every alive worker has exited. */
  ended(): boolean {
    return this.alive().every((w) => w.worker.child.exitCode !== null);
  }

  seen(): string {
    return seen(this.workers.map((w) => w.worker)) + `\nrounds ${JSON.stringify(this.rounds)}`;
  }

  private spawn(): ChurnWorker {
    const name = `w-${this.started++}`;
    const worker = startDenoWorker(this.server.url, this.job, ['--name', name]);
    const w: ChurnWorker = { name, worker, startedAt: Date.now() };
    this.workers.push(w);
    return w;
  }
}

/** What the churn did to the job, as bench/churn.ts prints it and the test checks it. */
export function churnOutcome(churn: Churn) {
  const survivors = churn.alive();
  const ejections = churn.workers.flatMap((w) =>
    w.worker.events
      .filter((e) => e.event === 'peer-left' && e.reason === 'ejected')
      .map((e) => ({ seen_by: w.name, name: e.name as string })),
  );
  const misbehaved = churn.workers.flatMap((w) =>
    w.worker.events
      .filter((e) => e.event === 'peer-misbehaved' || e.event === 'state-differs')
      .map((e) => ({ seen_by: w.name, ...e })),
  );
  return {
    kills: churn.rounds.length,
    joins: churn.rounds.length,
    rounds: churn.rounds,
    survivors: survivors.map((w) => ({
      name: w.name,
      exit: w.worker.child.exitCode,
      steps: w.worker.result?.steps ?? null,
      size: w.worker.result?.size ?? null,
      weights_hash: (w.worker.result?.weights_hash as string | null | undefined) ?? null,
      stopped_by: w.worker.result?.stopped_by ?? null,
    })),
    ejections,
    misbehaved,
  };
}

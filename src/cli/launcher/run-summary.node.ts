/**
 * What `ringtrain run` says when its workers have exited: which workers failed
 * or left and why, where a recovery checkpoint is, and rank 0's result as one
 * summary (a JSON line with --json). Its return value is the exit code.
 */
import { existsSync } from 'node:fs';
import { type EvaluationFailed, evaluationFailedLine } from '../evaluation-failure.ts';
import { printLine, stderr } from '../host.node.ts';
import type { RunOptions } from '../options/run-options.node.ts';
import { type WorkerState, writeTimeline } from './run-workers.node.ts';

export interface RunEnd {
  o: RunOptions;
  workers: WorkerState[];
  /** Each worker's exit code, by index. */
  codes: number[];
  /** The newest recovery checkpoint a worker reported. */
  recovery: { step: number; path: string; diverged?: boolean } | undefined;
  runtime: 'node' | 'deno';
  say: (line: string) => Promise<void>;
  /** Why each worker that left the job left, by its name (`deno-2`), as the survivors heard it from the server. */
  departures?: Map<string, string>;
  /** The model as `train --json` names it: a built-in kind, or a model file's `name@hash`. */
  model?: string;
}

/** Who ended how: rank 0's result, and the workers that failed, were lost on the way or retired. */
interface Outcome {
  results: Record<string, unknown>[];
  /** An elastic run that the remaining ring finished. */
  done: boolean;
  rank0: Record<string, unknown> | undefined;
  failed: WorkerState[];
  lost: WorkerState[];
  retired: WorkerState[];
  /** Why a lost worker went: what the server announced (ejected, disconnected…), else its own words. */
  whyLost(w: WorkerState): string;
}

/** The run's save problem, as rank 0 reports it: the checkpoint --save names is not the last one. */
interface SaveFailed {
  step: number;
  path: string;
  error: string;
  fallback: string | null;
}

export async function reportRun(end: RunEnd): Promise<number> {
  const { o, workers } = end;
  const outcome = outcomeOf(end);
  const { rank0, failed } = outcome;
  if (o.timeline) writeTimeline(o.timeline, workers.length);
  await printFailures(end, outcome);
  // The run trained, but its last checkpoint is not where --save said: say where it is, and fail the
  // command, so that a script using the --save file does not take an older one for the result.
  const saveFailed = rank0?.save_failed as SaveFailed | null | undefined;
  if (saveFailed) {
    await printLine(
      `ringtrain: the checkpoint of step ${saveFailed.step} could not be written to ${saveFailed.path} (${saveFailed.error}); ` +
        (saveFailed.fallback
          ? `it is in ${saveFailed.fallback}: copy it where it belongs, or resume from it with --resume ${saveFailed.fallback}`
          : 'nor to the temporary directory: it is lost'),
      stderr,
    );
  }
  const evaluationFailure = rank0?.evaluation_failed as EvaluationFailed | null | undefined;
  if (evaluationFailure)
    await printLine(evaluationFailedLine(evaluationFailure, saveFailed ? saveFailed.fallback : o.save), stderr);
  if (rank0) {
    // The fields `train --json` has too carry the same names and meanings there (test/cli/json-fields.test.ts).
    const summary = {
      ...measuredFields(rank0, outcome.results, end.runtime),
      ...settingsFields(end, rank0),
      ...endingFields(end, outcome),
      ...perRankFields(o, rank0, outcome.results, saveFailed),
    };
    if (o.json) await printLine(JSON.stringify(summary));
    else await sayDone(end, outcome, summary, !!evaluationFailure);
  }
  return failed.length === 0 && rank0 && !saveFailed ? 0 : 1;
}

function outcomeOf({ o, workers, codes, runtime, departures }: RunEnd): Outcome {
  const results = workers.map((w) => w.result).filter((r): r is Record<string, unknown> => !!r);
  // An elastic job is done when the ring that remained took every step (a worker's result without
  // stopped_by). Whoever left on the way (killed, ejected, stopped on an error of its own) is a loss,
  // not the run's end, and its last rank says nothing: the survivors' ring numbers ranks afresh.
  const finished = results.filter((r) => !r.stopped_by);
  const done = o.settings.elastic && finished.length > 0;
  const rank0 = done
    ? (finished.find((r) => r.rank === 0) ?? finished[0])
    : (results.find((r) => r.rank === 0) ?? results[0]);
  const ended = done ? workers.filter((w, i) => codes[i] !== 0 && (!w.result || w.result.stopped_by)) : [];
  const whyLost = (w: WorkerState): string => {
    const stopped = w.result?.stopped_by as { message?: string } | undefined;
    return departures?.get(`${runtime}-${w.index}`) ?? stopped?.message ?? `exit ${codes[w.index]}`;
  };
  return {
    results,
    done,
    rank0,
    failed: workers.filter((w, i) => codes[i] !== 0 && !ended.includes(w) && !(w.retired && !w.training)),
    lost: ended.filter((w) => !w.retired),
    retired: ended.filter((w) => w.retired),
    whyLost,
  };
}

/** The lost workers, and when the run failed: each failed worker, its last words, and the recovery checkpoint. */
async function printFailures({ o, codes, recovery }: RunEnd, outcome: Outcome): Promise<void> {
  const { failed, lost, rank0, results, whyLost } = outcome;
  for (const w of lost)
    await printLine(
      `ringtrain: worker ${w.index} left the run early (exit ${codes[w.index]}: ${whyLost(w)}); the others finished without it`,
      stderr,
    );
  if (failed.length === 0 && rank0) return;
  for (const w of failed) {
    const why = w.result?.stopped_by as { message?: string } | undefined;
    await printLine(
      `ringtrain: worker ${w.index}${w.rank !== undefined ? ` (rank ${w.rank})` : ''} exited with ${codes[w.index]}${why?.message ? `: ${why.message}` : ''}`,
      stderr,
    );
    // The recovery file is named once, below, not once per rank that saved it.
    if (!w.result)
      for (const l of w.stderrTail.filter((l) => !l.includes('resume with --resume')).slice(-8))
        await printLine(`  | ${l}`, stderr);
  }
  if (recovery && existsSync(recovery.path)) {
    const what = recovery.diverged
      ? `the run diverged; step ${recovery.step}, the last one evaluated before it did,`
      : `the last completed step (${recovery.step})`;
    await printLine(
      `ringtrain: ${what} is saved in ${recovery.path}; resume with: ringtrain run -np ${o.np} --resume ${recovery.path} …`,
      stderr,
    );
  } else if (results.some((r) => r.stopped_by)) {
    const why = results.find((r) => r.no_recovery)?.no_recovery;
    await printLine(`ringtrain: no recovery checkpoint was written${why ? `: ${why}` : ''}`, stderr);
  }
}

/** The summary's first fields: what rank 0 measured (and the bytes every rank sent). */
function measuredFields(rank0: Record<string, unknown>, results: Record<string, unknown>[], runtime: string) {
  return {
    test_accuracy: rank0.test_accuracy,
    test_loss: rank0.test_loss,
    train_loss: rank0.train_loss,
    // The words workload's metric: nats per character over the validation words (test_loss for the others).
    val_loss: rank0.test_loss,
    steps: rank0.steps,
    epochs: rank0.epochs,
    size: rank0.size,
    samples_per_s: rank0.samples_per_s,
    tokens_per_s: rank0.tokens_per_s,
    allreduce_bytes: results.reduce((s, r) => s + Number(r.allreduce_bytes ?? 0), 0),
    // Rank 0's, over every step but the first: collectives run, how many of them the step waited for one
    // after another (the rest ran beside one already running), and how many went to the coordinator.
    collectives_per_step: rank0.collectives_per_step ?? null,
    sequential_collectives_per_step: rank0.sequential_collectives_per_step ?? null,
    negotiations_per_step: rank0.negotiations_per_step ?? null,
    collectives_by_name_per_step: rank0.collectives_by_name_per_step ?? null,
    // Gradient buckets reduced as backward finished them (0: the whole gradient was read, then reduced).
    gradient_buckets_per_step: rank0.gradient_buckets_per_step ?? null,
    // The rank that waited longest on the ring after its own compute, s per step (each rank's in exposed_allreduce_by_rank).
    exposed_allreduce_s_per_step: longestExposed(results),
    train_seconds: rank0.train_seconds,
    runtime,
    adapter: rank0.adapter,
    gpu_waits: rank0.gpu_waits ?? null,
  };
}

/** The largest of the ranks' exposed allreduce figures (null when no rank has one). */
function longestExposed(results: Record<string, unknown>[]): number | null {
  const figures = results.map((r) => r.exposed_allreduce_s_per_step).filter((x): x is number => typeof x === 'number');
  return figures.length > 0 ? Math.max(...figures) : null;
}

/** The run's settings, as `train --json` names them. */
function settingsFields({ o, model }: RunEnd, rank0: Record<string, unknown>) {
  return {
    model: model ?? o.model,
    params: rank0.params ?? null,
    optimizer: o.optimizer,
    // What --batch means in both commands: examples per step on each peer.
    batch: o.batch,
    micro_batch: o.microBatch ?? null,
    global_batch: o.shares?.globalBatch ?? o.np * o.batch,
    lr: o.lr,
    lr_schedule: o.settings.lrSchedule,
    seed: o.seed,
    fp16: o.fp16,
    // As `train --json`: the precision rank 0 trained at; f16-mixed, the steps an overflow skipped and the loss scale.
    precision: rank0.precision ?? 'f32',
    ...(rank0.precision === 'f16-mixed' ? { skipped_steps: rank0.skipped_steps, loss_scale: rank0.loss_scale } : {}),
  };
}

/** How the run ended: whether it is whole, who was lost, retired or stopped it. */
function endingFields({ o, workers }: RunEnd, outcome: Outcome) {
  const { failed, lost, retired, done, results, whyLost } = outcome;
  return {
    ok: failed.length === 0,
    lost_workers: lost.map((w) => w.index),
    departed: lost.map((w) => ({ worker: w.index, reason: whyLost(w) })),
    retired_workers: retired.map((w) => w.index),
    workers_started: workers.length,
    stopped_by: done ? null : (results.find((r) => r.stopped_by)?.stopped_by ?? null),
    timeline: o.timeline ?? null,
  };
}

/** What each rank reports of itself (links, memory, its copy of the data), and where the checkpoint went. */
function perRankFields(
  o: RunOptions,
  rank0: Record<string, unknown>,
  results: Record<string, unknown>[],
  saveFailed: SaveFailed | null | undefined,
) {
  const byRank = [...results].sort((a, b) => Number(a.rank) - Number(b.rank));
  return {
    // Per rank: what carried each link of its last ring ('tcp', 'webrtc'), the TCP connections it
    // refused, and the CRC-32 of its final weights (replicas that agree print the same number).
    links_by_rank: byRank.map((r) => ({
      rank: r.rank,
      links: r.links ?? [],
      tcp_refused: r.tcp_refused ?? 0,
      weights_crc32: r.weights_crc32 ?? null,
    })),
    saved: saveFailed ? (saveFailed.fallback ?? null) : (o.save ?? null),
    save_failed: saveFailed ?? null,
    evaluation_failed: rank0.evaluation_failed ?? null,
    // Each worker's peak resident memory, by rank (a CPU adapter's GPU buffers included): what the job costs a
    // machine.
    peak_rss_bytes_by_rank: byRank.map((r) => ({ rank: r.rank, peak_rss_bytes: r.peak_rss_bytes ?? null })),
    // Each rank's exposed allreduce: s per step it waited on the ring after its own compute (null: no steady step reduced).
    exposed_allreduce_by_rank: byRank.map((r) => ({
      rank: r.rank,
      exposed_allreduce_s_per_step: r.exposed_allreduce_s_per_step ?? null,
    })),
    // Each rank's SHA-256 of its final weights and optimizer state (one value on every rank: the ring agreed).
    weights_hash_by_rank: byRank.map((r) => ({ rank: r.rank, weights_hash: r.weights_hash ?? null })),
    // Each rank's precision, and under f16-mixed its skipped steps and loss scale (equal on every rank of one ring).
    precision_by_rank: byRank.map((r) => ({
      rank: r.rank,
      precision: r.precision ?? 'f32',
      skipped_steps: r.skipped_steps ?? null,
      loss_scale: r.loss_scale ?? null,
    })),
    // A text run: the text's hash, and the vocabulary each rank built from its copy.
    // A table run: the table's hash, and the split each rank made from its copy.
    ...(o.tableSha256 !== undefined
      ? {
          table_sha256: o.tableSha256,
          labels_sha256: o.labelsSha256 ?? null,
          split_by_rank: byRank.map((r) => ({ rank: r.rank, ...(r.table_split as object) })),
        }
      : {}),
    ...(o.text
      ? {
          text_sha256: o.textSha256 ?? null,
          tokenizer: o.tokenizer ?? null,
          vocabulary_size: rank0.vocabulary_size ?? null,
          vocabulary_by_rank: byRank.map((r) => ({ rank: r.rank, size: r.vocabulary_size, crc32: r.vocabulary_crc32 })),
        }
      : {}),
  };
}

/** The summary in words: done or stopped, steps, peers, the evaluation, the speed, and who was ejected or lost. */
async function sayDone(
  { o, runtime, say }: RunEnd,
  { lost, whyLost }: Outcome,
  summary: ReturnType<typeof measuredFields> & { ok: boolean },
  evaluationFailed: boolean,
): Promise<void> {
  // A run that stopped early may have no evaluation: say so rather than print 0%.
  const accuracy =
    typeof summary.test_accuracy === 'number' && !evaluationFailed
      ? evaluationText(o.model, summary.test_accuracy, Number(summary.val_loss))
      : 'not evaluated';
  const ejected = lost.filter((w) => whyLost(w).startsWith('ejected'));
  const others = lost.filter((w) => !ejected.includes(w));
  const losses = [
    ejected.length
      ? `${ejected.length} peer${ejected.length > 1 ? 's' : ''} ejected (${ejected.map((w) => `${runtime}-${w.index}: ${whyLost(w)}`).join('; ')})`
      : '',
    others.length
      ? `${others.length} peer${others.length > 1 ? 's' : ''} lost (${others.map((w) => `${runtime}-${w.index}: ${whyLost(w)}`).join('; ')})`
      : '',
  ].filter(Boolean);
  await say(
    `${summary.ok ? 'done' : 'stopped'}: ${summary.steps} steps on ${summary.size} peers, ${accuracy}, ${Math.round(Number(summary.samples_per_s))} samples/s${losses.length ? `; ${losses.join('; ')}` : ''}`,
  );
}

/** An evaluation in words: a classifier's accuracy; the transformer's validation loss and perplexity (what the page shows too). */
export function evaluationText(model: string, accuracy: number, loss: number): string {
  if (model !== 'transformer') return `test accuracy ${(accuracy * 100).toFixed(2)}%`;
  // Per token: a character for the words and the char tokenizer, a byte or a GPT-2 token for the others.
  return `validation loss ${loss.toFixed(4)} nats/token (perplexity ${Math.exp(loss).toFixed(2)})`;
}

/**
 * `--aggregation mean|trimmed-mean:F|median|centered-clip[:tau]`: how a job's
 * peers combine their gradients each step (src/collectives/robust/robust-aggregate.ts).
 *
 * On `run` it becomes the job hyperparameter `aggregation`, so every peer,
 * browser tabs included, uses the same rule. On `worker` it is what this peer
 * expects of the job it joins: a job that combines gradients otherwise is
 * refused before the peer takes a place in the ring, as a worker whose model
 * file is not the job's is. `train` has one peer and nothing to combine.
 */
import { parseAggregation, type Aggregation } from '../../collectives/robust/robust-aggregate.ts';
import { ErrorCode, isRingtrainError, RingtrainError } from '../../core/errors.ts';
import { FIELDS, type Hyperparameters, type JobSettings } from '../../job/settings.ts';

/** `worker`'s form of the flag (`run`'s is made from the settings' table, src/job/fields.ts). */
export const WORKER_AGGREGATION_OPTION = [
  FIELDS.aggregation.flag!,
  'the aggregation this peer expects: a job that combines gradients otherwise is refused before it joins the ring',
] as const;

/** --aggregation's value (the flag named in the error), or undefined when not given. */
export function parseAggregationOption(raw: unknown): Aggregation | undefined {
  if (raw === undefined) return undefined;
  try {
    return parseAggregation(String(raw));
  } catch (err) {
    if (isRingtrainError(err)) throw new RingtrainError(ErrorCode.InvalidArgument, `--aggregation: ${err.message}.`);
    throw err;
  }
}

/** The same rule, whatever spelling (trimmed-mean:0.25 and trimmed-mean:.25 are one rule). */
export function aggregationText(a: Aggregation | undefined): string {
  if (!a || a.rule === 'mean') return 'mean';
  if (a.rule === 'trimmed-mean') return `trimmed-mean:${a.trim}`;
  if (a.rule === 'centered-clip') return a.tau === undefined ? 'centered-clip' : `centered-clip:${a.tau}`;
  return a.rule;
}

/**
 * The job hyperparameters `run`'s rule sets (none for the mean: the job stays
 * as before). Which flags it does not combine with is decided in
 * src/job/conflicts.ts and refused before this is asked.
 */
export function aggregationHyperparameters(a: Aggregation | undefined): Hyperparameters {
  if (!a || a.rule === 'mean') return {};
  return { aggregation: aggregationText(a) };
}

/** `worker --aggregation`: the job's rule must be the one this peer was started with. */
export function checkJobAggregation(
  expected: Aggregation | undefined,
  reduce: Partial<Pick<JobSettings['reduce'], 'aggregation'>>,
  jobId: string,
): void {
  if (!expected) return;
  const raw = reduce.aggregation;
  const theirs = aggregationText(raw === undefined ? undefined : parseAggregation(raw));
  const mine = aggregationText(expected);
  if (theirs !== mine) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `job ${jobId} combines gradients by ${theirs}, but this worker was started with --aggregation ${mine}; join a job that uses ${mine}, or drop --aggregation to take the job's rule.`,
    );
  }
}

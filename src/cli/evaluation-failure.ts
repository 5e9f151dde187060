/**
 * How `train` and `run` report an evaluation that failed. The run itself
 * stands: its steps were taken and its checkpoint was written before the
 * evaluation began, so the command still exits 0. A script tells the two
 * apart by `evaluation_failed` in the --json line (null when the evaluation
 * ran), whose `code` is the RingtrainError's.
 */
import type { RingtrainError } from '../core/errors.ts';

export interface EvaluationFailed {
  code: string;
  message: string;
}

export function evaluationFailed(err: RingtrainError | undefined): EvaluationFailed | null {
  return err ? { code: err.code, message: err.message } : null;
}

export function evaluationFailedLine(err: EvaluationFailed | RingtrainError, saved: string | undefined | null): string {
  const evaluateAgain = saved
    ? `; to evaluate it, run the command again with --resume ${saved} and the same --steps (add --eval-limit N for part of the set)`
    : '';
  return `ringtrain: the evaluation failed [${err.code}]: ${err.message}. Training is done${saved ? ` and its checkpoint is in ${saved}` : ''}${evaluateAgain}.`;
}

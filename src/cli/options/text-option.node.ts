/**
 * `--text` in a job: the text never travels (a job's config is small, and a
 * peer trains on nothing it did not choose); the job names the text and its
 * SHA-256, and a worker trains on its own copy, which must hash the same. Same
 * bytes, same vocabulary and the same windows on every rank.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { textSource } from '../../data/text.node.ts';
import type { JobConfig } from '../../signaling/protocol.ts';
import type { JobSettings } from '../../job/settings.ts';
import type { TextChoice } from './training-data.node.ts';

/** Text from the server shown in a message: no control characters, not too long. */
function shown(v: unknown): string {
  const clean = String(v).replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  return JSON.stringify(clean.length > 200 ? `${clean.slice(0, 200)}…` : clean);
}

/** The worker's --text against the job's: the same SHA-256, or a refusal naming both. */
export function workerText(
  job: { id: string; config: Pick<JobConfig, 'model'> },
  h: JobSettings['data'],
  given: string | undefined,
): TextChoice | undefined {
  const sha = h.textSha256;
  if (sha === undefined) {
    if (given !== undefined)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `job ${shown(job.id)} trains ${shown(job.config.model)} on its own data set, not on a text; drop --text ${given}`,
        { job: job.id },
      );
    return undefined;
  }
  if (given === undefined) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `job ${shown(job.id)} trains on the text ${shown(h.text)} (SHA-256 ${sha}); pass your copy of it: ringtrain worker --text FILE …`,
      { job: job.id, textSha256: sha },
    );
  }
  const ours = textSource(given).sha256;
  if (ours !== sha) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `this peer's --text ${given} has SHA-256 ${ours}, but job ${shown(job.id)} trains on ${shown(h.text)} with SHA-256 ${sha}: another text means other windows and maybe another vocabulary; pass the job's own text`,
      { job: job.id, ours, expected: sha },
    );
  }
  return { path: given, context: h.context, tokenizer: h.tokenizer };
}

/** Keys sorted at every level: two spellings of the same options compare equal. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

/** A worker's own --model-options, if it gives any, must be the job's: the job's are what every rank builds. */
export function checkWorkerModelOptions(
  jobId: string,
  given: Record<string, unknown> | undefined,
  jobs: Record<string, unknown> | undefined,
): void {
  if (given === undefined) return;
  if (canonical(given) === canonical(jobs ?? {})) return;
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    `this peer's --model-options ${JSON.stringify(given)} differ from job ${shown(jobId)}'s ${JSON.stringify(jobs ?? {})}; every rank builds the job's model: drop --model-options (or pass the job's)`,
    { ours: given, expected: jobs ?? {} },
  );
}

/**
 * `--data FILE.csv|.npy|.json` in a job: like `--text`, the table never
 * travels. The job names the table (and its labels file), their SHA-256 and
 * the label column; a worker trains on its own copies, which must hash the
 * same, so every rank reads the same rows and makes the same split (every
 * fifth row held out, table.ts).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ErrorCode, RingtrainError, unreadableReason } from '../../core/errors.ts';
import { rowFormatOf } from '../../data/rows.ts';
import type { TableChoice } from '../../data/table.node.ts';
import type { JobConfig } from '../../signaling/protocol.ts';
import type { JobSettings } from '../../job/settings.ts';

/** Text from the server shown in a message: no control characters, not too long. */
function shown(v: unknown): string {
  const clean = String(v).replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  return JSON.stringify(clean.length > 200 ? `${clean.slice(0, 200)}…` : clean);
}

/** Hex SHA-256 of a file's bytes; an unreadable file is refused naming the flag. */
export function fileSha256(file: string, flag: string): string {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `${flag} ${file}: cannot read it (${unreadableReason(err)})`,
      { file },
      { cause: err },
    );
  }
  return createHash('sha256').update(bytes).digest('hex');
}

/** Whether `--data` names a table of rows (rather than a directory of IDX files). */
export function isTable(data: string | undefined): data is string {
  return data !== undefined && rowFormatOf(data) !== undefined;
}

type Job = { id: string; config: Pick<JobConfig, 'model'> };

/** One of this peer's files against the job's: the same SHA-256, or a refusal naming both. */
function checkCopy(job: Job, flag: string, given: string, jobName: string | undefined, expected: string): void {
  const ours = fileSha256(given, flag);
  if (ours === expected) return;
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    `this peer's ${flag} ${given} has SHA-256 ${ours}, but job ${shown(job.id)} trains on ${shown(jobName)} with SHA-256 ${expected}: other rows mean another split and other labels; pass the job's own file`,
    { job: job.id, ours, expected },
  );
}

/**
 * The worker's --data (and --labels, --label-column) against the job's table:
 * its copies checked, the label column taken from the job. Undefined for a job
 * that trains on no table (the worker's --data, if any, is then an IDX directory).
 */
export function workerTable(
  job: Job,
  h: JobSettings['data'],
  given: { data?: string; labels?: string; labelColumn?: string },
): TableChoice | undefined {
  const sha = h.tableSha256;
  if (sha === undefined) {
    if (isTable(given.data) || given.labels !== undefined || given.labelColumn !== undefined) {
      const drop = [
        isTable(given.data) ? `--data ${given.data}` : '',
        given.labels !== undefined ? `--labels ${given.labels}` : '',
        given.labelColumn !== undefined ? `--label-column ${given.labelColumn}` : '',
      ].filter(Boolean);
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `job ${shown(job.id)} trains ${shown(job.config.model)} on no table; drop ${drop.join(' and ')}`,
        { job: job.id },
      );
    }
    return undefined;
  }
  const what = `${shown(h.table)} (SHA-256 ${sha})${h.labels !== undefined ? ` with the labels ${shown(h.labels)} (SHA-256 ${h.labelsSha256})` : ''}`;
  if (!isTable(given.data)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `job ${shown(job.id)} trains on the table ${what}; pass your copy of it: ringtrain worker --data FILE${h.labels !== undefined ? ' --labels FILE' : ''} …`,
      { job: job.id, tableSha256: sha },
    );
  }
  checkCopy(job, '--data', given.data, h.table, sha);
  if (h.labelsSha256 !== undefined) {
    if (given.labels === undefined) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `job ${shown(job.id)} trains on the table ${what}; pass your copy of the labels too: --labels FILE`,
        { job: job.id, labelsSha256: h.labelsSha256 },
      );
    }
    checkCopy(job, '--labels', given.labels, h.labels, h.labelsSha256);
    return { labels: given.labels };
  }
  if (given.labels !== undefined)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `job ${shown(job.id)} reads its labels from the column ${shown(h.labelColumn)} of its table; drop --labels ${given.labels}`,
      { job: job.id },
    );
  if (given.labelColumn !== undefined && given.labelColumn !== h.labelColumn) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `this peer's --label-column ${given.labelColumn} differs from job ${shown(job.id)}'s ${shown(h.labelColumn)}; drop it (the job's is used)`,
      { job: job.id },
    );
  }
  return { labelColumn: h.labelColumn };
}

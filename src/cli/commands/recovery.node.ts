/**
 * Where a worker puts the state of the last completed step when its run ends
 * with an error: always a new file, named after the step, never over an
 * existing file (an earlier run's recovery, the user's --save or --resume).
 *
 *   --recovery r.safetensors  ->  r-step<N>.safetensors
 *   --save m.safetensors      ->  m.recovery-step<N>.safetensors
 *   neither                   ->  ringtrain-recovery-step<N>.safetensors
 *
 * Every stopping rank saves (each may be on its own machine). Replicas that
 * stopped at the same step hold the same weights, so when ranks share a disk
 * the first file written serves them all: a rank that finds a file of its
 * step with its weights keeps it; a file with other contents is left alone and
 * the next free name (`…-step<N>-2.safetensors`) is used.
 */
import { existsSync, linkSync, readFileSync, rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { checkpointPieces, decodeCheckpoint, type TrainingCheckpoint } from '../../checkpoint/checkpoint.ts';
import { writeSyncedTemp } from '../../checkpoint/file.node.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';

/** Names of one step's recovery file, the first choice first. */
export function recoveryStem(o: { recovery?: string; save?: string }): string {
  const strip = (p: string) => p.replace(/\.safetensors$/i, '');
  if (o.recovery) return strip(o.recovery);
  if (o.save) return `${strip(o.save)}.recovery`;
  return 'ringtrain-recovery';
}

/** Writes `c` to a new file at `path`, atomically; false (and nothing written) if `path` exists. */
function writeNewFile(path: string, c: TrainingCheckpoint): boolean {
  let tmp: string | undefined;
  try {
    tmp = writeSyncedTemp(path, checkpointPieces(c));
    // link() refuses an existing target, where rename() would replace it: no window to clobber.
    linkSync(tmp, path);
    return true;
  } catch (err) {
    if ((err as { code?: string }).code === 'EEXIST') return false;
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `cannot write the recovery checkpoint ${path}: ${(err as Error).message}; check that the directory exists and is writable.`,
      { path },
      { cause: err },
    );
  } finally {
    if (tmp !== undefined) rmSync(tmp, { force: true });
  }
}

/** Whether the checkpoint at `path` holds `c`'s step and weights (written by another rank of this ring). */
function holdsSameState(path: string, c: TrainingCheckpoint): boolean {
  let saved: TrainingCheckpoint;
  try {
    saved = decodeCheckpoint(readFileSync(path), path);
  } catch {
    return false;
  }
  if (saved.step !== c.step || saved.model !== c.model || saved.layoutHash !== c.layoutHash) return false;
  return Object.entries(c.params).every(([name, t]) => {
    const other = saved.params[name]?.data;
    return other !== undefined && other.length === t.data.length && other.every((v, i) => Object.is(v, t.data[i]));
  });
}

/** Saves `c` as a recovery checkpoint; answers the path that holds it. `avoid`: paths never to use (the --resume source). */
export function saveRecovery(stem: string, c: TrainingCheckpoint, avoid: string[] = []): string {
  const avoided = new Set(avoid.map((p) => resolve(p)));
  for (let n = 1; n < 1000; n++) {
    const path = `${stem}-step${c.step}${n > 1 ? `-${n}` : ''}.safetensors`;
    if (avoided.has(resolve(path))) continue;
    if (!existsSync(path) && writeNewFile(path, c)) return path;
    if (holdsSameState(path, c)) return path;
  }
  throw new RingtrainError(
    ErrorCode.InvalidArgument,
    `too many recovery checkpoints named ${stem}-step${c.step}*.safetensors; move old ones away or give --recovery another path`,
    { stem },
  );
}

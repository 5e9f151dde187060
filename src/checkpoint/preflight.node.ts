/**
 * Node and Deno: the checks a command makes on its checkpoint paths before it
 * trains, joins a ring or starts workers, so that a run that cannot save, or
 * resumes the wrong file, stops before it costs an epoch or touches the
 * user's files:
 *   --resume  the file is readable, intact (checksums, finite values) and,
 *             when the model is known here, of the same model and optimizer;
 *   --save    its directory exists and takes a file (written and removed
 *             again), and it does not hold a later checkpoint than the run
 *             would write first (unless --overwrite).
 * The model's layout needs the model itself, so the full fit check is
 * src/distributed/train/resume-check.ts; this file needs no GPU.
 */
import { openSync, closeSync, rmSync, statSync, writeSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { checkCheckpointKind, type TrainingCheckpoint } from './checkpoint.ts';
import { loadCheckpoint, refuseToReplace } from './file.node.ts';

export interface CheckpointPaths {
  save?: string;
  resume?: string;
  overwrite?: boolean;
}

function cannotSave(path: string, why: string, cause?: unknown): RingtrainError {
  return new RingtrainError(
    ErrorCode.InvalidArgument,
    `--save ${path}: ${why}. Nothing was trained or written.`,
    { path },
    cause === undefined ? undefined : { cause },
  );
}

/**
 * Checks that a checkpoint can be saved at `path` by a run that starts at
 * `startStep`: the first save of that run holds a later step, so a file
 * holding a later one would be replaced by an earlier state.
 */
export function checkSaveTarget(path: string, o: { startStep: number; overwrite?: boolean }): void {
  const dir = dirname(resolve(path));
  let isDir: boolean;
  try {
    isDir = statSync(dir).isDirectory();
  } catch (err) {
    const code = (err as { code?: string }).code;
    throw cannotSave(
      path,
      code === 'ENOENT'
        ? `the directory ${dir} does not exist; create it (mkdir -p ${dir}) or save elsewhere`
        : `cannot look at ${dir} (${code ?? String(err)})`,
      err,
    );
  }
  if (!isDir) throw cannotSave(path, `${dir} is not a directory`);
  try {
    if (statSync(path).isDirectory())
      throw cannotSave(path, 'that is a directory; give a file path such as model.safetensors');
  } catch (err) {
    if (err instanceof RingtrainError) throw err;
    // absent: fine
  }
  // The probe is created exclusively, so it never clobbers a file of the same name.
  const probe = join(
    dir,
    `.${basename(path)}.probe-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`,
  );
  try {
    const fd = openSync(probe, 'wx');
    try {
      writeSync(fd, new Uint8Array(1));
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    const code = (err as { code?: string }).code;
    throw cannotSave(
      path,
      `cannot write in ${dir} (${code ?? String(err)}); check its permissions and free space, or save elsewhere`,
      err,
    );
  } finally {
    rmSync(probe, { force: true });
  }
  if (!o.overwrite) refuseToReplace(path, o.startStep);
}

/**
 * Runs every check that needs only the paths (and, when given, the model and
 * optimizer kinds), and returns the loaded --resume checkpoint.
 */
export function preflightCheckpoints(
  o: CheckpointPaths & { model?: string; optimizer?: string },
): TrainingCheckpoint | undefined {
  const resume = o.resume ? loadCheckpoint(o.resume) : undefined;
  if (resume && o.model !== undefined)
    checkCheckpointKind(resume, { model: o.model, optimizer: o.optimizer }, o.resume);
  if (o.save) checkSaveTarget(o.save, { startStep: resume?.step ?? 0, overwrite: o.overwrite });
  return resume;
}

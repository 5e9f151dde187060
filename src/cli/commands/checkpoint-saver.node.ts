/**
 * A worker's checkpoints when the disk misbehaves mid-run. A save that fails
 * (a read-only or full file system, a directory gone) must not end a run that
 * is otherwise fine: the error is reported with its cause, training goes on,
 * and the next save tries the target again. Meanwhile the state that could not
 * be saved goes to a fallback file in the OS's temporary directory, named per
 * job and rank, so that a crash after a failed save still leaves a checkpoint;
 * the final result says where it is. A recovery checkpoint (the run ended with
 * an error) that cannot go beside --save goes there too.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TrainingCheckpoint } from '../../checkpoint/checkpoint.ts';
import { saveCheckpoint } from '../../checkpoint/file.node.ts';
import { recoveryStem, saveRecovery } from './recovery.node.ts';

export interface SaveTrouble {
  /** The step that could not be saved at `path`, and why. */
  step: number;
  path: string;
  error: string;
  /** Where that step went instead, or null when the fallback failed too. */
  fallback: string | null;
}

/** What the file system said, as a person can act on it: its code (EROFS, ENOSPC, ENOTDIR…) and message. */
export function causeOf(err: unknown): string {
  const inner = (err as { cause?: unknown })?.cause ?? err;
  const code = (inner as { code?: unknown })?.code;
  const message = inner instanceof Error ? inner.message : String(inner);
  return typeof code === 'string' && !message.includes(code) ? `${code}: ${message}` : message;
}

export class CheckpointSaver {
  /** The last save that failed, while no later save has landed. */
  trouble: SaveTrouble | null = null;

  constructor(
    private readonly o: { save?: string; overwrite: boolean; recovery?: string; resume?: string },
    /** The job's id and this rank, for the fallback's name (the id comes from the server: only safe characters are kept). */
    private readonly where: () => { job: string; rank: number },
    private readonly say: (line: string) => void | Promise<void>,
  ) {}

  private fallbackStem(): string {
    const { job, rank } = this.where();
    return join(tmpdir(), `ringtrain-${job.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 64)}-rank${rank}`);
  }

  /** Saves `c` at --save; on failure reports it, puts `c` in the fallback, and returns normally. */
  async save(c: TrainingCheckpoint): Promise<void> {
    if (!this.o.save) return;
    try {
      saveCheckpoint(this.o.save, c, { overwrite: this.o.overwrite });
      if (this.trouble) await this.say(`saved step ${c.step} in ${this.o.save}: the target is writable again`);
      this.trouble = null;
      return;
    } catch (err) {
      let fallback: string | null = null;
      let fallbackError = '';
      try {
        fallback = saveRecovery(this.fallbackStem(), c, this.o.resume ? [this.o.resume] : []);
      } catch (e) {
        fallbackError = causeOf(e);
      }
      this.trouble = { step: c.step, path: this.o.save, error: causeOf(err), fallback };
      await this.say(
        `could not save step ${c.step} in ${this.o.save} (${this.trouble.error}); training goes on and the next save tries again. ` +
          (fallback
            ? `Step ${c.step} is in ${fallback} meanwhile.`
            : `Saving it in the temporary directory failed too (${fallbackError}): free space or fix the disk.`),
      );
    }
  }

  /** A recovery checkpoint beside --save (recovery.node.ts), or in the fallback directory if that cannot be written. */
  recover(c: TrainingCheckpoint): string {
    const avoid = this.o.resume ? [this.o.resume] : [];
    try {
      return saveRecovery(recoveryStem(this.o), c, avoid);
    } catch (err) {
      const path = saveRecovery(this.fallbackStem(), c, avoid);
      void this.say(
        `could not write the recovery checkpoint beside ${recoveryStem(this.o)} (${causeOf(err)}); it went to ${path}`,
      );
      return path;
    }
  }
}

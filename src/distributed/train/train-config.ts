/**
 * The trainer's config at the library's door, checked once by the same rules
 * as a job's settings (src/job/conflicts.ts) before anything is built. A config
 * made from a job's settings passed the settings' schema, so it passes here
 * too; one written by hand, by a program that embeds the trainer, is refused
 * here naming the settings as the config spells them.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { configSettingName, refuseConflicts } from '../../job/conflicts.ts';
import type { DistributedTrainConfig } from './trainer-types.ts';

/** Refuses settings that do not combine in a trainer's config, naming them as the config spells them. */
export function refuseConflictingConfig(config: DistributedTrainConfig): void {
  if (config.balance === 'speed' && config.globalBatch === undefined)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'balancing batch shares by speed needs a fixed global batch; give the job a globalBatch (--global-batch)',
    );
  if (config.balance === 'speed' && config.syncEvery !== undefined)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'balancing batch shares by speed is for synchronous training; drop --balance speed or --sync-every',
    );
  const guard = guardOf(config);
  const settings = { ...config, doubtRule: guard !== false && guard.doubt !== false };
  refuseConflicts(settings, configSettingName(settings));
}

/**
 * The contribution guard a config asks for. Absent: the norm rules only. The doubt and direction
 * rules run when asked for, as a job's config does: the doubt rule's clip changes honest sums, so
 * an unasked-for default would break data-parallel equivalence.
 */
export function guardOf(config: DistributedTrainConfig): NonNullable<DistributedTrainConfig['guard']> {
  return config.guard ?? { direction: false, doubt: false };
}

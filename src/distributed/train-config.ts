/**
 * The trainer's config at the library's door. A config made from a job's
 * settings (job-config.ts) passed the settings' schema, which refuses the
 * settings that do not combine (src/job/conflicts.ts) where the job enters: it
 * is not checked again. A config written by hand, by a program that embeds the
 * trainer, passed no schema: it is checked here, once, by the same rules,
 * before anything is built.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { configSettingName, refuseConflicts } from '../job/conflicts.ts';
import type { DistributedTrainConfig } from './trainer-types.ts';

/** Configs made from settings the schema accepted. A set of the objects, so a copy or a hand-made look-alike is checked. */
const acceptedBySchema = new WeakSet<DistributedTrainConfig>();

/** Records that `config` was made from settings the schema accepted (job-config.ts, once it parsed them). */
export function madeFromSchema(config: DistributedTrainConfig): DistributedTrainConfig {
  acceptedBySchema.add(config);
  return config;
}

/** Refuses settings that do not combine in a config that no schema checked, naming them as the config spells them. */
export function refuseUncheckedConfig(config: DistributedTrainConfig): void {
  if (acceptedBySchema.has(config)) return;
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

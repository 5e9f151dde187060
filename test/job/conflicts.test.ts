/**
 * Which job settings do not combine is decided once (setting-conflicts.ts);
 * `run` words a conflict with flags (test/cli/check-options, aggregation-option),
 * the library with config keys (here).
 */
import { describe, expect, it } from 'vitest';
import { parseAggregation } from '../../src/collectives/robust/robust-aggregate.ts';
import { ErrorCode } from '../../src/core/errors.ts';
import { configSettingName, refuseConflicts, settingConflict, type ConflictSettings } from '../../src/job/conflicts.ts';
import { trainConfigFromJob } from '../../src/distributed/train/job-config.ts';
import { refuseConflictingConfig } from '../../src/distributed/train/train-config.ts';
import type { DistributedTrainConfig } from '../../src/distributed/train/trainer.ts';

const median = parseAggregation('median');

describe('setting conflicts', () => {
  it('finds each pair that does not combine, and none in the settings that do', () => {
    const cases: [ConflictSettings, [string, string] | undefined][] = [
      [{}, undefined],
      [
        { verify: true, compression: 'none', aggregation: parseAggregation('mean'), syncEvery: 4, balance: 'speed' },
        undefined,
      ],
      [{ aggregation: median, compression: 'none', balance: 'equal' }, undefined],
      [{ verify: true, compression: 'fp16' }, ['verify', 'compression']],
      [{ verify: true, aggregation: median }, ['verify', 'aggregation']],
      [{ aggregation: median, compression: 'int8' }, ['aggregation', 'compression']],
      [{ aggregation: parseAggregation('trimmed-mean:0.25'), syncEvery: 8 }, ['aggregation', 'syncEvery']],
      [{ aggregation: parseAggregation('centered-clip'), balance: 'speed' }, ['aggregation', 'balance']],
      [{ doubtRule: true, balance: 'speed' }, ['doubtRule', 'balance']],
      [{ doubtRule: true, balance: 'equal', verify: true }, undefined],
    ];
    for (const [settings, want] of cases) {
      const c = settingConflict(settings);
      expect(c && [c.first, c.second], JSON.stringify(settings)).toEqual(want);
    }
  });

  it('names both config keys and their values in the library wording', () => {
    const settings: ConflictSettings = { aggregation: median, syncEvery: 4 };
    expect(() => refuseConflicts(settings, configSettingName(settings))).toThrow(
      "aggregation 'median' combines gradients at every step; syncEvery 4 averages models every few steps: drop one.",
    );
    const verify: ConflictSettings = { verify: true, compression: 'topk:0.01' };
    expect(() => refuseConflicts(verify, configSettingName(verify))).toThrow(
      expect.objectContaining({
        code: ErrorCode.InvalidArgument,
        message:
          "verify: true checks that the sum is exact; compression 'topk:0.01' sends rounded gradients: drop one.",
      }),
    );
    expect(() => refuseConflicts({ verify: true }, configSettingName({ verify: true }))).not.toThrow();
  });

  it("refuses a hand-made trainer config at the library's door, and takes one made from a job's settings as the schema checked it", () => {
    const base: DistributedTrainConfig = {
      model: 'mlp',
      optimizer: 'sgd',
      epochs: 1,
      batch: 8,
      lr: 0.1,
      momentum: 0,
      weightDecay: 0,
      seed: 1,
    };
    expect(() => refuseConflictingConfig({ ...base, verify: true, compression: 'fp16' })).toThrow(
      "verify: true checks that the sum is exact; compression 'fp16' sends rounded gradients: drop one.",
    );
    expect(() => refuseConflictingConfig({ ...base, guard: {}, balance: 'speed', globalBatch: 64 })).toThrow(
      /the doubt rule \(guard.doubt\) measures every peer's gradient/,
    );
    expect(() => refuseConflictingConfig({ ...base, balance: 'speed' })).toThrow(/needs a fixed global batch/);
    expect(() => refuseConflictingConfig({ ...base, verify: true })).not.toThrow();
    const fromJob = trainConfigFromJob({
      model: 'mlp',
      optimizer: 'sgd',
      batchPerPeer: 8,
      minPeers: 1,
      maxPeers: 2,
      hyperparameters: { lr: 0.1, verify: true },
    });
    expect(() => refuseConflictingConfig(fromJob)).not.toThrow();
    // The job's schema refused the conflict before any config was made of it.
    expect(() =>
      trainConfigFromJob({
        model: 'mlp',
        optimizer: 'sgd',
        batchPerPeer: 8,
        minPeers: 1,
        maxPeers: 2,
        hyperparameters: { lr: 0.1, verify: true, compression: 'fp16' },
      }),
    ).toThrow(/drop one/);
    // A config is checked whoever made it: a changed copy of one made from a job is refused like a hand-made one.
    expect(() => refuseConflictingConfig({ ...fromJob, compression: 'fp16' })).toThrow(/drop one/);
  });
});

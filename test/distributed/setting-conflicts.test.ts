/**
 * Which job settings do not combine is decided once (setting-conflicts.ts);
 * `run` words a conflict with flags (test/cli/check-options, aggregation-option),
 * the library with config keys (here).
 */
import { describe, expect, it } from 'vitest';
import { parseAggregation } from '../../src/collectives/robust-aggregate.ts';
import { ErrorCode } from '../../src/core/errors.ts';
import { configSettingName, refuseConflicts, settingConflict, type ConflictSettings } from '../../src/distributed/setting-conflicts.ts';

const median = parseAggregation('median');

describe('setting conflicts', () => {
  it('finds each pair that does not combine, and none in the settings that do', () => {
    const cases: [ConflictSettings, [string, string] | undefined][] = [
      [{}, undefined],
      [{ verify: true, compression: 'none', aggregation: parseAggregation('mean'), syncEvery: 4, balance: 'speed' }, undefined],
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
    expect(() => refuseConflicts(settings, configSettingName(settings))).toThrow("aggregation 'median' combines gradients at every step; syncEvery 4 averages models every few steps: drop one.");
    const verify: ConflictSettings = { verify: true, compression: 'topk:0.01' };
    expect(() => refuseConflicts(verify, configSettingName(verify))).toThrow(expect.objectContaining({ code: ErrorCode.InvalidArgument, message: "verify: true checks that the sum is exact; compression 'topk:0.01' sends rounded gradients: drop one." }));
    expect(() => refuseConflicts({ verify: true }, configSettingName({ verify: true }))).not.toThrow();
  });
});

/**
 * `--aggregation` on `run` (a job hyperparameter every peer reads back) and on
 * `worker` (the rule this peer expects of the job it joins), and the refusals
 * that name the flag before anything starts.
 */
import { describe, expect, it } from 'vitest';
import { jobSpecFor, runCommand } from '../../src/cli/commands/run.ts';
import { checkJobAggregation, parseAggregationOption } from '../../src/cli/options/aggregation-option.ts';
import { trainConfigFromJob } from '../../src/distributed/train/job-config.ts';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';
import { plainRunOptions, type RunOptions } from '../support/run-options.ts';

const parseRun = (args: string[]) => runCommand().exitOverride().parseAsync(args, { from: 'user' });
const base = plainRunOptions();
const specOf = (o: Partial<RunOptions>) => jobSpecFor({ ...base, ...o } as RunOptions);

describe('ringtrain run --aggregation', () => {
  it('carries the rule to every peer through the job config; the mean leaves the job as it was', () => {
    for (const [flag, want] of [
      ['median', { rule: 'median' }],
      ['trimmed-mean:0.25', { rule: 'trimmed-mean', trim: 0.25 }],
      ['centered-clip', { rule: 'centered-clip' }],
      ['centered-clip:2', { rule: 'centered-clip', tau: 2 }],
    ] as const) {
      const spec = specOf({ aggregation: parseAggregationOption(flag) });
      expect(spec.config.hyperparameters.aggregation).toBe(flag);
      expect(trainConfigFromJob(spec.config).aggregation, flag).toMatchObject(want);
    }
    expect(specOf({ aggregation: parseAggregationOption('mean') }).config.hyperparameters.aggregation).toBeUndefined();
    expect(specOf({}).config.hyperparameters.aggregation).toBeUndefined();
  });

  it('refuses, naming the flag, a malformed rule and a rule that does not fit the other flags', async () => {
    const cases: [string[], RegExp][] = [
      [['--aggregation', 'avg'], /--aggregation: aggregation 'avg': unknown rule 'avg'/],
      [['--aggregation', 'trimmed-mean:0.6'], /trimmed-mean needs a fraction F with 0 <= F < 0.5/],
      [['--aggregation', 'centered-clip:0'], /centered-clip takes a finite radius tau > 0/],
      [
        ['--aggregation', 'median', '--compression', 'fp16'],
        /--aggregation median compares every peer's exact gradients; --compression fp16 sends rounded gradients/,
      ],
      [
        ['--aggregation', 'median', '--fp16'],
        /--aggregation median compares every peer's exact gradients; --fp16 sends rounded gradients/,
      ],
      [
        ['--aggregation', 'trimmed-mean:0.25', '--sync-every', '4'],
        /--aggregation trimmed-mean:0.25 combines gradients at every step; --sync-every/,
      ],
      [
        ['--aggregation', 'centered-clip', '--balance', 'speed'],
        /--aggregation centered-clip weighs every peer's gradient alike; --balance speed/,
      ],
    ];
    for (const [flags, message] of cases) {
      const run = parseRun(['--np', '3', '--steps', '1', ...flags]);
      await expect(run, flags.join(' ')).rejects.toThrow(message);
      await expect(run).rejects.toBeInstanceOf(RingtrainError);
      await expect(run).rejects.toMatchObject({ code: ErrorCode.InvalidArgument });
    }
  });
});

describe('ringtrain worker --aggregation', () => {
  it('accepts a job with the same rule (however spelled) and refuses one with another, naming both', () => {
    expect(() => checkJobAggregation(parseAggregationOption('median'), { aggregation: 'median' }, 'j')).not.toThrow();
    expect(() =>
      checkJobAggregation(parseAggregationOption('trimmed-mean:.25'), { aggregation: 'trimmed-mean:0.25' }, 'j'),
    ).not.toThrow();
    expect(() => checkJobAggregation(parseAggregationOption('mean'), {}, 'j')).not.toThrow();
    // No flag: the worker takes the job's rule, whatever it is.
    expect(() => checkJobAggregation(undefined, { aggregation: 'median' }, 'j')).not.toThrow();
    expect(() => checkJobAggregation(parseAggregationOption('median'), {}, 'job-7')).toThrow(
      /job job-7 combines gradients by mean, but this worker was started with --aggregation median/,
    );
    expect(() =>
      checkJobAggregation(parseAggregationOption('centered-clip'), { aggregation: 'centered-clip:1' }, 'j'),
    ).toThrow(/by centered-clip:1, but .* --aggregation centered-clip;/);
  });
});

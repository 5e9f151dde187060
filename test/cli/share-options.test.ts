/**
 * `ringtrain run --global-batch` and `--balance`: what they put in the job's
 * config (and what a worker reads back from it), and the refusals that name
 * the flag before anything starts.
 */
import { describe, expect, it } from 'vitest';
import { jobSpecFor, runCommand } from '../../src/cli/commands/run.ts';
import { parseShareOptions } from '../../src/cli/options/share-options.ts';
import { trainConfigFromJob } from '../../src/distributed/train/job-config.ts';
import { plainRunOptions, type RunOptions } from '../support/run-options.ts';

const parseRun = (args: string[]) => runCommand().exitOverride().parseAsync(args, { from: 'user' });
const base = plainRunOptions();
const configOf = (o: Partial<RunOptions>) => trainConfigFromJob(jobSpecFor({ ...base, ...o } as RunOptions).config);

describe('ringtrain run: the global batch and its shares', () => {
  it('fixes an elastic run at -np x --batch, keeps a fixed run per peer, and carries --global-batch and --balance to the workers', () => {
    const elastic = parseShareOptions({}, { np: 3, batch: 32, elastic: true }, false);
    expect(elastic).toEqual({ globalBatch: 96, balance: 'equal' });
    expect(configOf({ settings: { ...base.settings, elastic: true }, shares: elastic })).toMatchObject({
      globalBatch: 96,
      balance: 'equal',
      batch: 32,
    });
    // Not elastic: --batch per peer, as Horovod means it (the ring's batch is size x batch).
    const fixed = parseShareOptions({}, { np: 3, batch: 32, elastic: false }, false);
    expect(fixed).toEqual({ balance: 'equal' });
    expect(configOf({ shares: fixed }).globalBatch).toBeUndefined();
    // Balancing by speed needs a fixed figure to share: -np x --batch unless named.
    expect(parseShareOptions({ balance: 'speed' }, { np: 4, batch: 16, elastic: false }, false)).toEqual({
      globalBatch: 64,
      balance: 'speed',
    });
    const named = parseShareOptions(
      { globalBatch: '100', balance: 'speed' },
      { np: 4, batch: 64, elastic: false },
      false,
    );
    expect(configOf({ shares: named })).toMatchObject({ globalBatch: 100, balance: 'speed' });
  });

  it('refuses, naming the flag, a global batch too small for the peers, both --batch and --global-batch, or an unknown balance', async () => {
    expect(() => parseShareOptions({ globalBatch: '64' }, { np: 2, batch: 8, elastic: false }, true)).toThrow(
      /give --batch \(examples per peer\) or --global-batch \(examples per step for the whole ring\), not both/,
    );
    expect(() => parseShareOptions({ globalBatch: '4' }, { np: 2, batch: 8, elastic: true, maxNp: 6 }, false)).toThrow(
      /--global-batch must be a whole number from 6 \(one example for each of up to 6 peers\)/,
    );
    const cases: [string[], RegExp][] = [
      [['--global-batch', '2'], /--global-batch must be a whole number from 3/],
      [['--global-batch', '12.5'], /--global-batch must be a whole number/],
      [['--balance', 'fastest'], /--balance.*fastest.*Allowed choices are equal, speed/s],
    ];
    for (const [flags, message] of cases)
      await expect(parseRun(['--np', '3', '--steps', '1', ...flags]), flags.join(' ')).rejects.toThrow(message);
  });

  it('a job whose config says otherwise is refused by the worker, naming the hyperparameter', () => {
    const job = jobSpecFor(base).config;
    expect(() => trainConfigFromJob({ ...job, hyperparameters: { ...job.hyperparameters, balance: 'fast' } })).toThrow(
      /'balance' must be 'equal' or 'speed'/,
    );
    expect(() => trainConfigFromJob({ ...job, hyperparameters: { ...job.hyperparameters, globalBatch: 0 } })).toThrow(
      /'globalBatch' must be a whole number >= 1/,
    );
    expect(() => trainConfigFromJob({ ...job, hyperparameters: { ...job.hyperparameters, balance: 'speed' } })).toThrow(
      /give the job a 'globalBatch' and no 'syncEvery'/,
    );
    expect(() =>
      trainConfigFromJob({
        ...job,
        hyperparameters: { ...job.hyperparameters, balance: 'speed', globalBatch: 64, syncEvery: 4 },
      }),
    ).toThrow(/and no 'syncEvery'/);
  });
});

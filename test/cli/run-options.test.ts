/**
 * `ringtrain run`'s elastic options: Horovod's --min-np / --max-np, checked
 * against -np before anything starts, and the job config they make (a start
 * quorum of -np, so an unbroken elastic run is the same run as a fixed one).
 */
import { describe, expect, it } from 'vitest';
import { jobSpecFor, runCommand } from '../../src/cli/run.ts';

/** Parses `run` options in this process: a refused option throws before anything starts. */
const parseRun = (args: string[]) => runCommand().exitOverride().parseAsync(args, { from: 'user' });
type RunOptions = Parameters<typeof jobSpecFor>[0];
const base = { model: 'mlp', optimizer: 'sgd', lr: 0.05, momentum: 0.9, weightDecay: 0, seed: 1, epochs: 1, batch: 32, np: 3, extraPeers: 1, fp16: false, scaleLr: false, lrSchedule: 'constant', warmupSteps: 0, backwardPasses: 1 } as unknown as RunOptions;

describe('ringtrain run --elastic options', () => {
  it('make an elastic job start with all -np workers and go on down to --min-np', () => {
    expect(jobSpecFor({ ...base, elastic: true, minNp: 1, maxNp: 4 }).config).toMatchObject({ minPeers: 1, maxPeers: 4, startPeers: 3 });
    expect(jobSpecFor({ ...base, elastic: true, minNp: 2, maxNp: 8, serverWait: 5 }).config).toMatchObject({ minPeers: 2, maxPeers: 8, startPeers: 3, hyperparameters: { serverWaitMs: 5000, elastic: true } });
    // A fixed ring needs every worker all along.
    const fixed = jobSpecFor({ ...base, elastic: false }).config;
    expect(fixed).toMatchObject({ minPeers: 3, maxPeers: 4 });
    expect(fixed.startPeers).toBeUndefined();
  });

  it('are refused, naming the flag, when out of range or without --elastic', async () => {
    const cases: [string[], RegExp][] = [
      [['--min-np', '2'], /--min-np only applies to an elastic run; add --elastic/],
      [['--elastic', '--min-np', '4'], /--min-np must be a whole number from 1 to 3/],
      [['--elastic', '--max-np', '2'], /--max-np must be a whole number from 3 to/],
      [['--elastic', '--server-wait', '-1'], /--server-wait must be a whole number from 0/],
    ];
    for (const [flags, message] of cases) {
      await expect(parseRun(['--np', '3', '--steps', '1', ...flags]), flags.join(' ')).rejects.toThrow(message);
    }
  });
});

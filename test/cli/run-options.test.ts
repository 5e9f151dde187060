/**
 * `ringtrain run`'s elastic options: Horovod's --min-np / --max-np, checked
 * against -np before anything starts, and the job config they make (a start
 * quorum of -np, so an unbroken elastic run is the same run as a fixed one).
 */
import { describe, expect, it } from 'vitest';
import { jobSpecFor, runCommand, runRecipe } from '../../src/cli/commands/run.ts';
import { parseTrainOptions } from '../../src/cli/options/train-options.ts';
import { trainConfigFromJob } from '../../src/distributed/train/job-config.ts';
import { plainRunOptions, type RunOptions } from '../support/run-options.ts';

/** Parses `run` options in this process: a refused option throws before anything starts. */
const parseRun = (args: string[]) => runCommand().exitOverride().parseAsync(args, { from: 'user' });
const base = plainRunOptions({ extraPeers: 1 });

describe('ringtrain run --elastic options', () => {
  it('make an elastic job start with all -np workers and go on down to --min-np', () => {
    expect(
      jobSpecFor({ ...base, settings: { ...base.settings, elastic: true }, minNp: 1, maxNp: 4 }).config,
    ).toMatchObject({
      minPeers: 1,
      maxPeers: 4,
      startPeers: 3,
    });
    expect(
      jobSpecFor({ ...base, settings: { ...base.settings, elastic: true }, minNp: 2, maxNp: 8, serverWait: 5 }).config,
    ).toMatchObject({
      minPeers: 2,
      maxPeers: 8,
      startPeers: 3,
      hyperparameters: { serverWaitMs: 5000, elastic: true },
    });
    // A fixed ring needs every worker all along.
    const fixed = jobSpecFor(base).config;
    expect(fixed).toMatchObject({ minPeers: 3, maxPeers: 4 });
    expect(fixed.startPeers).toBeUndefined();
  });

  it("give every peer --precision f16-mixed through the job's config", () => {
    const job = jobSpecFor({ ...base, precision: 'f16-mixed' } as RunOptions).config;
    expect(trainConfigFromJob(job).precision).toBe('f16-mixed');
    expect(trainConfigFromJob(jobSpecFor(base).config).precision).toBe('f32');
  });

  it('are refused, naming the flag, when out of range or without --elastic', async () => {
    const cases: [string[], RegExp][] = [
      [['--min-np', '2'], /--min-np only applies to an elastic run; add --elastic/],
      [['--elastic', '--min-np', '4'], /--min-np must be a whole number from 1 to 3/],
      [['--elastic', '--max-np', '2'], /--max-np must be a whole number from 3 to/],
      [['--elastic', '--server-wait', '-1'], /--server-wait must be a whole number from 0/],
      [['--precision', 'f8'], /precision/],
    ];
    for (const [flags, message] of cases) {
      await expect(parseRun(['--np', '3', '--steps', '1', ...flags]), flags.join(' ')).rejects.toThrow(message);
    }
  });
});

describe('ringtrain run --model transformer', () => {
  /** The options `run` would launch with, without launching. */
  async function recipeOf(args: string[]) {
    const cmd = runCommand().exitOverride();
    let out: ReturnType<typeof runRecipe> | undefined;
    cmd.action((raw: Record<string, unknown>) => void (out = runRecipe(cmd, raw)));
    await cmd.parseAsync(args, { from: 'user' });
    return out!;
  }

  it('takes the words recipe with its 256 words split over the peers, and the job carries it to every worker', async () => {
    const { raw, recipe } = await recipeOf(['--np', '4', '--model', 'transformer']);
    expect(recipe?.sampling).toBe('replacement');
    expect(raw).toMatchObject({
      batch: '64',
      warmupSteps: '100',
      optimizer: 'adamw',
      lr: '0.003',
      steps: '1000',
      lrSchedule: 'cosine',
    });
    const o = {
      ...base,
      ...parseTrainOptions(raw),
      settings: {
        ...base.settings,
        lrSchedule: 'cosine',
        warmupSteps: 100,
        sampling: 'replacement',
        warmupFrom: 'zero',
      },
      evalLimit: 50,
    } as RunOptions;
    const config = trainConfigFromJob(jobSpecFor(o).config);
    expect(config).toMatchObject({
      model: 'transformer',
      optimizer: 'adamw',
      batch: 64,
      lr: 0.003,
      steps: 1000,
      lrSchedule: 'cosine',
      warmupSteps: 100,
      warmupFrom: 'zero',
      sampling: 'replacement',
    });
    expect(jobSpecFor(o).config.hyperparameters.evalLimit).toBe(50);
    // Flags given win over the recipe.
    expect(
      (await recipeOf(['--np', '2', '--model', 'transformer', '--batch', '8', '--warmup-steps', '0'])).raw,
    ).toMatchObject({ batch: '8', warmupSteps: '0' });
    // The MLP has no recipe: nothing changes.
    expect((await recipeOf(['--np', '2', '--model', 'mlp'])).raw).toMatchObject({ batch: '64', warmupSteps: '0' });
  });

  it('gives the CNN cosine decay at 32 examples a step (8 per peer at -np 4) and leaves the rate to the optimizer', async () => {
    const { raw, recipe } = await recipeOf(['--np', '4', '--model', 'cnn']);
    expect(recipe?.sampling).toBe('epochs');
    expect(raw).toMatchObject({ batch: '8', lrSchedule: 'cosine', warmupSteps: '0' });
    expect(parseTrainOptions(raw)).toMatchObject({ optimizer: 'sgd', lr: 0.05 });
    // AdamW keeps its own rate; flags given win.
    expect(
      parseTrainOptions((await recipeOf(['--np', '4', '--model', 'cnn', '--optimizer', 'adamw'])).raw),
    ).toMatchObject({ lr: 0.002 });
    expect(
      (await recipeOf(['--np', '4', '--model', 'cnn', '--batch', '16', '--lr-schedule', 'constant'])).raw,
    ).toMatchObject({ batch: '16', lrSchedule: 'constant' });
  });
});

describe('ringtrain run --no-overlap', () => {
  it('writes overlap: false into the job, and nothing when overlap is on (the default), so older peers read the job as before', () => {
    const off = { ...base, settings: { ...base.settings, overlap: false } };
    expect(jobSpecFor(off).config.hyperparameters.overlap).toBe(false);
    expect(trainConfigFromJob(jobSpecFor(off).config).overlap).toBe(false);
    expect(jobSpecFor(base).config.hyperparameters).not.toHaveProperty('overlap');
    expect(trainConfigFromJob(jobSpecFor(base).config).overlap).toBe(true);
  });
});

describe('ringtrain run --micro-batch', () => {
  it('writes microBatch into the job for every worker to split its steps by, and nothing without it', () => {
    const split = { ...base, microBatch: 4 } as RunOptions;
    expect(jobSpecFor(split).config.hyperparameters.microBatch).toBe(4);
    expect(trainConfigFromJob(jobSpecFor(split).config).microBatch).toBe(4);
    expect(jobSpecFor(base).config.hyperparameters).not.toHaveProperty('microBatch');
    expect(trainConfigFromJob(jobSpecFor(base).config).microBatch).toBeUndefined();
  });
});

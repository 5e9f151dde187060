/**
 * `ringtrain run`'s WAN options: checked before anything starts, naming the
 * flag, and turned into the job hyperparameters every peer trains by.
 */
import { describe, expect, it } from 'vitest';
import { jobSpecFor, runCommand } from '../../src/cli/commands/run.ts';
import { parseWanOptions } from '../../src/cli/options/wan-options.ts';
import { wanBenchConfig } from '../../src/cli/commands/bench-wan.node.ts';
import { trainConfigFromJob } from '../../src/distributed/train/job-config.ts';
import { plainRunOptions, type RunOptions } from '../support/run-options.ts';

const parseRun = (args: string[]) => runCommand().exitOverride().parseAsync(args, { from: 'user' });
const base = plainRunOptions({ np: 2 });

describe('ringtrain run --compression / --sync-every', () => {
  it('become job hyperparameters that a peer reads back as its training config', () => {
    const wan = parseWanOptions({ compression: 'int8', syncEvery: '8', outerLr: '0.5' });
    expect(wan).toEqual({ compression: 'int8', syncEvery: 8, outerLr: 0.5, outerMomentum: 0.9 });
    const job = jobSpecFor({ ...base, wan });
    expect(job.config.hyperparameters).toMatchObject({
      compression: 'int8',
      syncEvery: 8,
      outerLr: 0.5,
      outerMomentum: 0.9,
    });
    expect(trainConfigFromJob(job.config)).toMatchObject({
      compression: 'int8',
      syncEvery: 8,
      outerLr: 0.5,
      outerMomentum: 0.9,
    });
    // Without --sync-every the job trains synchronously; --fp16 still means fp16.
    const sync = trainConfigFromJob(jobSpecFor({ ...base, wan: parseWanOptions({ fp16: true }) }).config);
    expect(sync.syncEvery).toBeUndefined();
    expect(sync.compression).toBe('fp16');
    // --ring-order rtt travels as a hyperparameter the session reads when a ring forms.
    expect(jobSpecFor({ ...base, wan: parseWanOptions({ ringOrder: 'rtt' }) }).config.hyperparameters).toMatchObject({
      ringOrder: 'rtt',
    });
    expect(
      jobSpecFor({ ...base, wan: parseWanOptions({ ringOrder: 'rank' }) }).config.hyperparameters.ringOrder,
    ).toBeUndefined();
    // Top-k travels as its string, ratio included.
    expect(
      trainConfigFromJob(jobSpecFor({ ...base, wan: parseWanOptions({ compression: 'topk:0.01' }) }).config)
        .compression,
    ).toBe('topk:0.01');
    expect(() =>
      trainConfigFromJob({ ...job.config, hyperparameters: { ...job.config.hyperparameters, compression: 'topk:3' } }),
    ).toThrow(/top-k ratio/);
  });

  it('are refused, naming the flag', async () => {
    const cases: [string[], RegExp][] = [
      [
        ['--compression', 'int4'],
        /'--compression <kind>' argument 'int4' is invalid\. unknown compression 'int4'; use 'none', 'fp16', 'int8' or 'topk:R'/,
      ],
      [['--compression', 'topk:0'], /top-k ratio must be a number in \(0, 1\]/],
      [['--fp16', '--compression', 'int8'], /--fp16 and --compression int8 disagree/],
      [['--outer-lr', '0.5'], /--outer-lr only applies to local SGD; add --sync-every/],
      [['--sync-every', '0'], /--sync-every\) must be a whole number of steps >= 1/],
      [['--sync-every', '4', '--outer-momentum', '1.5'], /--outer-momentum\) must be in \[0, 1\)/],
    ];
    for (const [flags, message] of cases) {
      await expect(parseRun(['--np', '2', '--steps', '1', ...flags]), flags.join(' ')).rejects.toThrow(message);
    }
  });
});

describe('ringtrain bench wan settings', () => {
  const ok = {
    peers: 4,
    model: 'cnn' as const,
    batch: 8,
    lr: 0.05,
    epochs: 4,
    trainExamples: 512,
    testExamples: 256,
    syncEvery: 8,
    outerLr: 0.7,
    outerMomentum: 0,
    rateMbit: 10,
    delayMs: 50,
  };
  it('compare loopback with the emulated link (rate in bits/s for tbf, delay for the link wrapper)', () => {
    expect(wanBenchConfig(ok).links).toEqual([
      { name: 'loopback', delayMs: 0 },
      { name: '10 Mbit/s, 50 ms', rateBitsPerS: 10e6, delayMs: 50 },
    ]);
  });
  it('refuse settings that cannot run, naming the flag', () => {
    expect(() => wanBenchConfig({ ...ok, peers: 1 })).toThrow(/--peers must be a whole number from 2/);
    expect(() => wanBenchConfig({ ...ok, trainExamples: 16 })).toThrow(
      /--train-examples must be a whole number from 32/,
    );
    expect(() => wanBenchConfig({ ...ok, rateMbit: 0 })).toThrow(/--rate-mbit must be a number > 0/);
    expect(() => wanBenchConfig({ ...ok, topk: 0 })).toThrow(/--topk must be a number in \(0, 1\]/);
    expect(wanBenchConfig(ok).topk).toBe(0.01);
  });
});

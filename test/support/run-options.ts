/**
 * The options of a plain `ringtrain run` (an MLP with SGD on 3 workers, no extra peers, no
 * schedule), as the run command's option tests build a job from them with jobSpecFor.
 */
import type { jobSpecFor } from '../../src/cli/commands/run.ts';

export type RunOptions = Parameters<typeof jobSpecFor>[0];

export function plainRunOptions(overrides: Partial<RunOptions> = {}): RunOptions {
  return {
    model: 'mlp',
    optimizer: 'sgd',
    lr: 0.05,
    momentum: 0.9,
    weightDecay: 0,
    seed: 1,
    epochs: 1,
    batch: 32,
    np: 3,
    extraPeers: 0,
    fp16: false,
    settings: {
      elastic: false,
      scaleLr: false,
      lrSchedule: 'constant',
      warmupSteps: 0,
      warmupFrom: 'base',
      sampling: 'epochs',
      backwardPassesPerStep: 1,
    },
    ...overrides,
  } as unknown as RunOptions;
}

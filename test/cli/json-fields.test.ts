/**
 * `train --json` and `run --json` name the same things alike: one process
 * training a model file and a ring of one training it with the same flags
 * report the same fields, of the same kinds, and the same values for what
 * the flags fixed (the model by its `name@hash`, the batch, the steps, the
 * learning rate…). Scripts and benches read either line with one parser.
 */
import { describe, expect, it } from 'vitest';
import { ringtrain } from '../support/cli.ts';

/** Fields both lines carry. */
const SHARED = [
  'test_accuracy',
  'test_loss',
  'train_loss',
  'val_loss',
  'steps',
  'epochs',
  'size',
  'samples_per_s',
  'tokens_per_s',
  'train_seconds',
  'runtime',
  'adapter',
  'gpu_waits',
  'model',
  'params',
  'optimizer',
  'batch',
  'global_batch',
  'lr',
  'lr_schedule',
  'seed',
  'saved',
  'evaluation_failed',
  'precision',
];
/** Of those, what the flags fix: equal in both. */
const FIXED = [
  'steps',
  'epochs',
  'size',
  'runtime',
  'model',
  'params',
  'optimizer',
  'batch',
  'global_batch',
  'lr',
  'lr_schedule',
  'seed',
  'saved',
  'precision',
];

const lastJson = (stdout: string) => JSON.parse(stdout.trim().split('\n').pop()!) as Record<string, unknown>;

describe('train --json and run --json', () => {
  it('agree on the fields they share', { timeout: 180_000 }, async () => {
    const flags = [
      '--model',
      'examples/my-model.ts',
      '--steps',
      '3',
      '--batch',
      '8',
      '--seed',
      '4',
      '--lr',
      '0.03',
      '--eval-limit',
      '20',
      '--runtime',
      'deno',
      '--json',
    ];
    const [train, run] = await Promise.all([ringtrain(['train', ...flags]), ringtrain(['run', '-np', '1', ...flags])]);
    expect(train.code, train.stderr).toBe(0);
    expect(run.code, run.stderr).toBe(0);
    const t = lastJson(train.stdout);
    const r = lastJson(run.stdout);
    for (const key of SHARED) {
      expect(t, `train --json lacks ${key}`).toHaveProperty(key);
      expect(r, `run --json lacks ${key}`).toHaveProperty(key);
      expect(typeof r[key], key).toBe(typeof t[key]);
    }
    for (const key of FIXED) expect(r[key], key).toEqual(t[key]);
    expect(t.model).toMatch(/^my-model@[0-9a-f]{8}$/);
    // Any other field both have means the same: the same kind of value.
    for (const key of Object.keys(t).filter((k) => k in r)) expect(typeof r[key], key).toBe(typeof t[key]);
  });
});

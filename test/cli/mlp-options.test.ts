/**
 * The mlp's options as docs/MODELS.md documents them: `--model-options
 * '{"hidden":[…],"activation":"tanh"}'` builds those layers (the checkpoint's
 * tensors say so) and records the options, which `--resume` then holds to.
 * And a model file that reads another input shape than the data's is refused
 * before the first step, naming the data, the model and both shapes.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeSafetensors } from '../../src/checkpoint/safetensors.ts';
import { ringtrain } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-mlp-options-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('train --model mlp --model-options', () => {
  it(
    'builds the hidden widths and activation it is given, records them, and resumes only with them',
    { timeout: 120_000 },
    async () => {
      const ckpt = join(dir, 'mlp.safetensors');
      const options = '{"hidden":[24,12],"activation":"tanh"}';
      const first = await ringtrain([
        'train',
        '--model',
        'mlp',
        '--model-options',
        options,
        '--steps',
        '2',
        '--batch',
        '16',
        '--eval-limit',
        '20',
        '--save',
        ckpt,
        '--json',
      ]);
      expect(first.code, first.stderr).toBe(0);
      const { tensors, metadata } = decodeSafetensors(readFileSync(ckpt));
      const shapes = Object.fromEntries(
        Object.entries(tensors)
          .filter(([n]) => n.startsWith('param/'))
          .map(([n, t]) => [n.slice('param/'.length), t.shape]),
      );
      expect(shapes).toEqual({
        'dense0.weight': [24, 784],
        'dense0.bias': [24],
        'dense1.weight': [12, 24],
        'dense1.bias': [12],
        'dense2.weight': [10, 12],
        'dense2.bias': [10],
      });
      expect(JSON.parse(metadata.model_spec)).toMatchObject({ kind: 'mlp', hidden: [24, 12], activation: 'tanh' });

      const other = await ringtrain([
        'train',
        '--model',
        'mlp',
        '--steps',
        '3',
        '--batch',
        '16',
        '--eval-limit',
        '20',
        '--resume',
        ckpt,
      ]);
      expect(other.code).not.toBe(0);
      expect(other.stderr).toContain('pass --model-options');
      const resumed = await ringtrain([
        'train',
        '--model',
        'mlp',
        '--model-options',
        options,
        '--steps',
        '3',
        '--batch',
        '16',
        '--eval-limit',
        '20',
        '--resume',
        ckpt,
        '--json',
      ]);
      expect(resumed.code, resumed.stderr).toBe(0);
      expect(JSON.parse(resumed.stdout.trim().split('\n').pop()!)).toMatchObject({ steps: 3 });
    },
  );

  it(
    "refuses a model file whose input shape is not the data's, naming the data, the model and both shapes",
    { timeout: 120_000 },
    async () => {
      const file = join(dir, 'narrow.ts');
      writeFileSync(
        file,
        `import type { ModelFactory } from 'ringtrain';\nconst model: ModelFactory = (nn) => ({ module: new nn.Sequential(new nn.Linear(100, 10)), inputShape: [100], classes: 10 });\nexport default model;\n`,
      );
      const run = await ringtrain(['train', '--model', file, '--steps', '1']);
      expect(run.code).not.toBe(0);
      expect(run.stderr).toMatch(
        /the mnist package \(training digits\) has examples of shape \[8000, 784\] with labels of 10 classes, but model narrow@[0-9a-f]{8} reads \[batch, 100\] and has 10 classes; give rows of 100 features or a model of 784 inputs/,
      );
    },
  );
});

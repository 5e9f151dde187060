/**
 * A checkpoint's identity is its layout (tensor names and shapes) and the
 * model's options, not the model file's text: `--model-options` reaches the
 * factory and the checkpoint; a comment-only edit of the file resumes; other
 * options, or a real change of the model, are refused naming what differs; and
 * every "pass --model X" in a refusal is a value --model accepts.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkCheckpointKind, checkpointFromFlat } from '../../src/checkpoint/checkpoint.ts';
import { decodeSafetensors } from '../../src/checkpoint/safetensors.ts';
import { isModelFile } from '../../src/engine/define.ts';
import { ringtrain } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-identity-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const FILE = `import type { ModelFactory, Tensor } from 'ringtrain';
const model: ModelFactory<{ width?: number }> = (nn, options = {}) => {
  const width = options.width ?? 64;
  class Net extends nn.Module {
    inp = new nn.Linear(784, width);
    norm = new nn.LayerNorm(width);
    head = new nn.Linear(width, 10);
    forward(x: Tensor): Tensor {
      return this.head.call(nn.F.gelu(this.norm.call(this.inp.call(x))));
    }
  }
  return { module: new Net(), inputShape: [784], classes: 10 };
};
export default model;
`;

const train = (...args: string[]) =>
  ringtrain([
    'train',
    '--model',
    join(dir, 'net.ts'),
    '--eval-limit',
    '20',
    '--batch',
    '16',
    '--optimizer',
    'adamw',
    ...args,
  ]);

describe('a checkpoint of a model file', () => {
  it('refusals name values --model accepts', () => {
    const c = checkpointFromFlat({
      model: 'narrow-ln-mlp@d64189f9',
      optimizer: 'sgd',
      step: 1,
      layout: [{ name: 'w', shape: [1], offset: 0, length: 1 }],
      params: new Float32Array(1),
    });
    let message = '';
    try {
      checkCheckpointKind(c, { model: 'mlp' }, 'keep.safetensors');
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain(
      "keep.safetensors holds a 'narrow-ln-mlp@d64189f9' model, not 'mlp'; pass --model ./narrow-ln-mlp.ts",
    );
    const passed = /pass --model (\S+)/.exec(message)![1];
    expect(isModelFile(passed)).toBe(true);
    // Two model files: the layout decides, not the name (which hashes the file's text).
    expect(() => checkCheckpointKind(c, { model: 'narrow-ln-mlp@0badf00d' }, 'keep.safetensors')).not.toThrow();
  });

  it('records --model-options, resumes after a comment-only edit, and refuses other options or another layout', async () => {
    const ckpt = join(dir, 'net.safetensors');
    writeFileSync(join(dir, 'net.ts'), FILE);
    const first = await train('--model-options', '{"width":16}', '--steps', '2', '--save', ckpt);
    expect(first.code, first.stderr).toBe(0);
    const spec = JSON.parse(decodeSafetensors(readFileSync(ckpt)).metadata.model_spec) as Record<string, unknown>;
    expect(spec).toMatchObject({ width: 16 });
    expect(decodeSafetensors(readFileSync(ckpt)).tensors['param/inp.weight'].shape).toEqual([16, 784]);

    // A comment changes the file's hash, not the model.
    writeFileSync(join(dir, 'net.ts'), `// tuned the width\n${FILE}`);
    const resumed = await train(
      '--model-options',
      '{"width":16}',
      '--steps',
      '3',
      '--resume',
      ckpt,
      '--save',
      ckpt,
      '--json',
    );
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout.trim().split('\n').pop()!)).toMatchObject({ steps: 3 });

    const otherOptions = await train('--steps', '4', '--resume', ckpt);
    expect(otherOptions.code).not.toBe(0);
    expect(otherOptions.stderr).toContain(
      `${ckpt} was saved with model options {"width":16} but this run builds {"width":null}; pass --model-options '{"width":16}'`,
    );

    // A real change: the head reads a wider layer.
    writeFileSync(
      join(dir, 'net.ts'),
      FILE.replace(
        'norm = new nn.LayerNorm(width);',
        'norm = new nn.LayerNorm(width);\n    mid = new nn.Linear(width, 2 * width);',
      )
        .replace('new nn.Linear(width, 10)', 'new nn.Linear(2 * width, 10)')
        .replace(
          'this.head.call(nn.F.gelu(this.norm.call(this.inp.call(x))))',
          'this.head.call(this.mid.call(nn.F.gelu(this.norm.call(this.inp.call(x)))))',
        ),
    );
    const changed = await train('--model-options', '{"width":16}', '--steps', '4', '--resume', ckpt);
    expect(changed.code).not.toBe(0);
    expect(changed.stderr).toContain(
      "has no tensor 'mid.weight' (the model expects shape [32,16]); in its place the checkpoint has 'head.weight' [10,16]",
    );
  }, 300_000);
});

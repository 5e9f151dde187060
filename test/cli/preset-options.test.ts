/** `--preset gpt2`: GPT-2 small's sizes and architecture where the flags leave them unset; explicit flags win; a text is required. */
import { describe, expect, it } from 'vitest';
import { modelOptionsWithSizes, parseTrainOptions } from '../../src/cli/options/train-options.ts';

const RAW = {
  model: 'transformer',
  epochs: '1',
  batch: '1',
  optimizer: 'adamw',
  momentum: '0.9',
  seed: '1',
  text: 'my.txt',
};

describe('--preset gpt2', () => {
  it("sizes 12 layers, width 768, 12 heads, 1,024 positions, context 1024 in GPT-2's architecture", () => {
    const o = parseTrainOptions({ ...RAW, preset: 'gpt2' });
    expect([o.layers, o.width, o.heads, o.context]).toEqual([12, 768, 12, 1024]);
    expect(modelOptionsWithSizes(o, undefined)).toEqual({
      layers: 12,
      width: 768,
      heads: 12,
      positions: 1024,
      arch: 'gpt2',
    });
  });

  it('keeps 1,024 positions at a shorter --context, refuses a longer one naming both, and lets --model-options positions override', () => {
    const o = parseTrainOptions({ ...RAW, preset: 'gpt2', context: '128' });
    expect(o.context).toBe(128);
    expect(modelOptionsWithSizes(o, undefined)).toMatchObject({ positions: 1024 });
    expect(modelOptionsWithSizes(o, { positions: 128 })).toMatchObject({ positions: 128 });
    expect(() => parseTrainOptions({ ...RAW, preset: 'gpt2', context: '2048' })).toThrow(
      /--context 2048 is longer than --preset gpt2's 1024 positions; give --context 1024 or less/,
    );
  });

  it('lets --layers, --width, --heads and --context override it', () => {
    const o = parseTrainOptions({ ...RAW, preset: 'gpt2', layers: '8', width: '640', heads: '8', context: '128' });
    expect([o.layers, o.width, o.heads, o.context]).toEqual([8, 640, 8, 128]);
  });

  it('is refused without --text, or under another name, or against --model-options that disagree', () => {
    expect(() => parseTrainOptions({ ...RAW, text: undefined, preset: 'gpt2' })).toThrow(
      /--preset gpt2 sizes a language model on a text; add --text FILE/,
    );
    expect(() => parseTrainOptions({ ...RAW, preset: 'gpt3' })).toThrow(/--preset must be one of gpt2/);
    const o = parseTrainOptions({ ...RAW, preset: 'gpt2' });
    expect(() => modelOptionsWithSizes(o, { arch: 'classic' })).toThrow(
      /--preset gpt2 and --model-options \{"arch":"classic"\} disagree/,
    );
  });
});

/**
 * Which architecture a transformer checkpoint resumes as, without a GPU: a
 * model_spec without `arch` is classic (every checkpoint from before GPT-2's
 * architecture); `train --resume` takes it from the checkpoint when the run
 * names none, and a run that builds the other one is refused naming the
 * option that resumes it.
 */
import { describe, expect, it } from 'vitest';
import type { TrainingCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { checkModelOptions, withResumedArch } from '../../src/distributed/train/model-fit.ts';

const OLD_SPEC = { kind: 'transformer', seed: 1, vocab: 85, context: 64, layers: 2, width: 64, heads: 4 };
const checkpoint = (spec: Record<string, unknown>) =>
  ({ model: 'transformer', extra: { model_spec: JSON.stringify(spec) } }) as unknown as TrainingCheckpoint;

describe("a transformer checkpoint's architecture", () => {
  it('resumes a checkpoint without arch as classic, and one with arch as what it records', () => {
    expect(withResumedArch(undefined, checkpoint(OLD_SPEC))).toEqual({ arch: 'classic' });
    expect(withResumedArch({ layers: 2 }, checkpoint({ ...OLD_SPEC, arch: 'gpt2' }))).toEqual({
      layers: 2,
      arch: 'gpt2',
    });
    // A run that names an arch keeps it (and the check below decides); no checkpoint, nothing to take.
    expect(withResumedArch({ arch: 'gpt2' }, checkpoint(OLD_SPEC))).toEqual({ arch: 'gpt2' });
    expect(withResumedArch(undefined, undefined)).toBeUndefined();
  });

  it('is the same model as a classic spec that records no arch, and refuses a GPT-2 build naming the option that resumes it', () => {
    expect(() => checkModelOptions(checkpoint(OLD_SPEC), { spec: OLD_SPEC }, 'old.safetensors')).not.toThrow();
    expect(() =>
      checkModelOptions(checkpoint(OLD_SPEC), { spec: { ...OLD_SPEC, arch: 'gpt2' } }, 'old.safetensors'),
    ).toThrow(
      `old.safetensors was saved with model options {"arch":"classic"} but this run builds {"arch":"gpt2"}; pass --model-options '{"arch":"classic"}' to resume it`,
    );
  });
});

/** createModel: the one entry point that picks a model by `kind`: a built-in one or a registered factory (define.ts). */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { Cnn } from './cnn.ts';
import { modelFromFactory, registeredModel } from './define.ts';
import { Mlp } from './mlp.ts';
import { Transformer } from './transformer.ts';
import type { Model, ModelSpec } from './model.ts';

export function createModel(gpu: Gpu, spec: ModelSpec): Model {
  switch (spec?.kind) {
    case 'mlp':
      return new Mlp(gpu, spec);
    case 'cnn':
      return new Cnn(gpu, spec);
    case 'transformer':
      return new Transformer(gpu, spec);
    default: {
      const kind = (spec as { kind?: unknown })?.kind;
      const factory = typeof kind === 'string' ? registeredModel(kind) : undefined;
      if (factory) {
        const { kind: name, seed, ...options } = spec as unknown as { kind: string; seed?: number } & Record<string, unknown>;
        return modelFromFactory(gpu, factory, { name, options, seed });
      }
      throw new RingtrainError(ErrorCode.InvalidArgument, `unknown model kind ${JSON.stringify((spec as { kind?: unknown })?.kind)}; use 'mlp', 'cnn' or 'transformer', or register one (registerModel, --model ./file.ts)`);
    }
  }
}

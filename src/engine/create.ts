/** createModel: the one entry point that picks a model by `kind`. */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { Cnn } from './cnn.ts';
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
    default:
      throw new RingtrainError(ErrorCode.InvalidArgument, `unknown model kind ${JSON.stringify((spec as { kind?: unknown })?.kind)}; use 'mlp', 'cnn' or 'transformer'`);
  }
}

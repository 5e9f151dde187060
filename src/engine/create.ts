/** createModel: the one entry point that picks a model by `kind`. */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { Gpu } from '../gpu/gpu.ts';
import { Mlp } from './mlp.ts';
import type { Model, ModelSpec } from './model.ts';

export function createModel(gpu: Gpu, spec: ModelSpec): Model {
  switch (spec?.kind) {
    case 'mlp':
      return new Mlp(gpu, spec);
    case 'cnn':
      throw new RingtrainError(ErrorCode.InvalidArgument, 'model kind "cnn" is not built in yet (src/engine/cnn.ts)');
    default:
      throw new RingtrainError(ErrorCode.InvalidArgument, `unknown model kind ${JSON.stringify((spec as { kind?: unknown })?.kind)}; use 'mlp' or 'cnn'`);
  }
}

/**
 * Does a checkpoint fit the model and optimizer a run is about to build?
 * Asked before a peer joins a ring (or a trainer starts), so a wrong --resume
 * stops that peer alone, before any step and before anything is written.
 *
 * The answer comes from the real model and optimizer (built on the GPU and
 * destroyed again: two buffers and the optimizer's state, no kernels run), so
 * the layout compared is exactly the one training would use.
 */
import {
  checkCheckpointKind,
  checkOptimizerState,
  flatParamsFor,
  type TrainingCheckpoint,
} from '../../checkpoint/checkpoint.ts';
import type { Dataset } from '../../data/dataset.ts';
import { createModel, createOptimizer } from '../../engine/index.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { checkClassNames, checkModelOptions, checkVocabulary, modelSpecFor } from './model-fit.ts';
import type { LocalTrainConfig } from './train-local.ts';

export async function checkResumeFits(
  gpu: Gpu,
  config: LocalTrainConfig,
  data: Dataset,
  c: TrainingCheckpoint,
  file: string,
): Promise<void> {
  checkCheckpointKind(c, config, file);
  const model = createModel(gpu, modelSpecFor(config, data));
  const optimizer = createOptimizer(model, {
    kind: config.optimizer,
    lr: config.lr,
    momentum: config.momentum,
    weightDecay: config.weightDecay,
  });
  try {
    checkModelOptions(c, model, file);
    checkVocabulary(c, data, file);
    checkClassNames(c, data, file);
    flatParamsFor(
      c,
      { model: config.model, optimizer: config.optimizer, layout: model.layout, flatLength: model.flatLength },
      file,
    );
    const fresh = await optimizer.exportState();
    checkOptimizerState(c, Object.fromEntries(Object.entries(fresh).map(([k, v]) => [k, v.length])), file);
  } finally {
    optimizer.destroy();
    model.destroy();
  }
}

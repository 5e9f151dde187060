/**
 * The settings the trainers take, declared apart from the code that reads
 * them: the trainers, the model checks and the warm-up all name them, and
 * none of them has to import another for it (which made import cycles).
 */

export interface LocalTrainConfig {
  /** 'mlp', 'cnn', or a registered model's name (a model file's, see src/engine/define.ts). */
  model: string;
  /** A registered optimizer's name (src/optimizers/). */
  optimizer: string;
  epochs: number;
  batch: number;
  lr: number;
  momentum: number;
  weightDecay: number;
  seed: number;
  /** Stop at this step (counted from the start of training); overrides epochs. */
  steps?: number;
  /** 'cosine' anneals the learning rate to zero by the last step (default 'constant'). */
  lrSchedule?: 'constant' | 'cosine';
  /** Read the recorded losses every this many steps (default 10); evaluations read them too. */
  readEvery?: number;
  /** Steps of linear warm-up from zero to lr (default 0). */
  warmupSteps?: number;
  /** 'replacement': every batch drawn uniformly at random with replacement (the words workload); default 'epochs'. */
  sampling?: 'epochs' | 'replacement';
  /**
   * Samples per forward-backward pass (`--micro-batch`): each step of `batch` runs batch/microBatch
   * passes whose gradients add up on the GPU, the activations of only microBatch samples in memory
   * (src/engine/micro-batch.ts). Must divide `batch`. Absent: one pass per step.
   */
  microBatch?: number;
  /** 'f16-mixed': the linear layers' operands in f16, sums in f32, dynamic loss scaling (needs 'shader-f16'); default 'f32'. */
  precision?: 'f32' | 'f16-mixed';
  /** Options for the model (`--model-options`): a model file's factory gets them; a built-in model's spec takes them (mlp: hidden, activation). */
  modelOptions?: Record<string, unknown>;
}

/** The job-wide settings of local SGD / DiLoCo (absent syncEvery: synchronous training). */
export interface LocalSgdConfig {
  /** Inner steps per outer step (H). */
  syncEvery?: number;
  /** The outer optimizer's learning rate (DiLoCo's 0.7 by default). */
  outerLr?: number;
  /** The outer optimizer's Nesterov momentum (0.9 by default; 0 is plain averaging). */
  outerMomentum?: number;
}

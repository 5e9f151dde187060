/** Node and Deno: IDX datasets from files on disk (see idx.ts for the format). */
import { readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { existsSync } from 'node:fs';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { ImageDataset } from './dataset.ts';
import { idxDataset } from './idx.ts';

async function readBytes(path: string): Promise<Uint8Array> {
  try {
    return new Uint8Array(await readFile(path));
  } catch (err) {
    const code = (err as { code?: string }).code;
    const why =
      code === 'ENOENT'
        ? 'does not exist'
        : code === 'EISDIR'
          ? 'is a directory'
          : `cannot be read (${code ?? String(err)})`;
    throw new RingtrainError(
      ErrorCode.BadData,
      `${path} ${why}; give the path of an IDX file (e.g. train-images-idx3-ubyte or its .gz).`,
      { path },
      { cause: err },
    );
  }
}

export async function loadIdxDataset(imagesPath: string, labelsPath: string, classes = 10): Promise<ImageDataset> {
  const [images, labels] = await Promise.all([readBytes(imagesPath), readBytes(labelsPath)]);
  return idxDataset(
    { bytes: images, name: basename(imagesPath) },
    { bytes: labels, name: basename(labelsPath) },
    classes,
  );
}

/**
 * The standard file pair in a directory, as MNIST and Fashion-MNIST name them:
 * `<split>-images-idx3-ubyte` and `<split>-labels-idx1-ubyte`, gzipped or not.
 */
export async function loadIdxSplit(dir: string, split: 'train' | 't10k'): Promise<ImageDataset> {
  const find = (stem: string): string => {
    for (const name of [stem, `${stem}.gz`]) {
      const p = join(dir, name);
      if (existsSync(p)) return p;
    }
    throw new RingtrainError(
      ErrorCode.BadData,
      `${join(dir, stem)}(.gz) not found; put the ${split} files of MNIST or Fashion-MNIST in ${dir}.`,
      { dir, file: stem },
    );
  };
  return loadIdxDataset(find(`${split}-images-idx3-ubyte`), find(`${split}-labels-idx1-ubyte`));
}

/**
 * The data a training command trains on, for `train` and `worker` alike:
 * the CMUdict words for the transformer, IDX files with --data, else the
 * bundled MNIST digits. `--eval-limit` keeps only the first examples of the
 * test (validation) set, for a quick run whose evaluation is only a glance.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { type Dataset, selectExamples } from '../data/dataset.ts';
import { loadIdxSplit } from '../data/idx.node.ts';
import { loadMnist } from '../data/mnist.node.ts';
import { loadWords } from '../data/words.node.ts';

export interface TrainingData {
  train: Dataset;
  test: Dataset;
  /** What the data is, for the lines a person reads. */
  name: string;
}

export async function loadTrainingData(model: string, dataDir: string | undefined): Promise<TrainingData> {
  if (model === 'transformer') {
    if (dataDir) throw new RingtrainError(ErrorCode.InvalidArgument, `--data gives IDX image files; the transformer trains on the CMUdict words, which come with it. Leave out --data ${dataDir}.`);
    const words = await loadWords();
    return { train: words.train, test: words.validation, name: 'CMUdict words' };
  }
  if (dataDir) {
    const [train, test] = await Promise.all([loadIdxSplit(dataDir, 'train'), loadIdxSplit(dataDir, 't10k')]);
    return { train, test, name: dataDir };
  }
  return { ...(await loadMnist()), name: 'mnist package' };
}

/** The first `limit` examples of `test` (all of them when limit is undefined or larger). */
export function limitEvaluation<D extends Dataset>(test: D, limit: number | undefined): D {
  if (limit === undefined || limit >= test.count) return test;
  return selectExamples(test, Uint32Array.from({ length: limit }, (_, i) => i));
}

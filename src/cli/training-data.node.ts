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
import { loadText } from '../data/text.node.ts';
import { rowFormatOf } from '../data/rows.ts';
import { loadTable, type TableChoice } from '../data/table.node.ts';
import { DEFAULT_TEXT_CONTEXT, textSplit } from '../data/text.ts';

export interface TrainingData {
  train: Dataset;
  test: Dataset;
  /** What the data is, for the lines a person reads. */
  name: string;
  /** --text: the text's SHA-256 and its vocabulary's size. */
  text?: { sha256: string; vocabularySize: number; tokens: 'chars' | 'bytes' };
}

/** --text: a text file (or @brown) cut into windows of `context` characters. */
export interface TextChoice {
  path: string;
  context?: number;
}

export async function loadTrainingData(model: string, dataDir: string | undefined, text?: TextChoice, table: TableChoice = {}): Promise<TrainingData> {
  if (dataDir && rowFormatOf(dataDir)) {
    if (model === 'transformer' || model === 'cnn') throw new RingtrainError(ErrorCode.InvalidArgument, `--data ${dataDir} is a table of rows: train the mlp or a model file on it, not the ${model}`);
    const t = loadTable(dataDir, table);
    return { train: t.train, test: t.test, name: `${dataDir}: ${t.train.count} training and ${t.test.count} test rows of ${t.features} features, ${t.classes} classes` };
  }
  if (table.labels !== undefined || table.labelColumn !== undefined) {
    throw new RingtrainError(ErrorCode.InvalidArgument, `--labels and --label-column go with --data FILE.csv|.npy|.json (a table of rows)`);
  }
  if (text) {
    if (model !== 'transformer') throw new RingtrainError(ErrorCode.InvalidArgument, `--text trains the transformer, not ${model}`);
    if (dataDir) throw new RingtrainError(ErrorCode.InvalidArgument, `--text and --data are two data sets; give one`);
    const loaded = loadText(text.path);
    const split = textSplit(loaded.text, text.context ?? DEFAULT_TEXT_CONTEXT, `--text ${text.path}`);
    const v = split.vocabulary;
    return {
      train: split.train,
      test: split.validation,
      name: `${loaded.name}: ${split.trainTokens} training and ${split.validationTokens} validation ${v.tokens}, a vocabulary of ${v.symbols.length}`,
      text: { sha256: loaded.sha256, vocabularySize: v.symbols.length, tokens: v.tokens },
    };
  }
  if (model === 'transformer') {
    if (dataDir) throw new RingtrainError(ErrorCode.InvalidArgument, `--data gives IDX image files; the transformer trains on the CMUdict words, which come with it. Leave out --data ${dataDir}.`);
    const words = await loadWords();
    return { train: words.train, test: words.validation, name: 'CMUdict words' };
  }
  // `source` names the data in a refusal (a model that reads another shape names it and both shapes).
  if (dataDir) {
    const [train, test] = await Promise.all([loadIdxSplit(dataDir, 'train'), loadIdxSplit(dataDir, 't10k')]);
    return { train: { ...train, source: `--data ${dataDir}` }, test, name: dataDir };
  }
  const mnist = await loadMnist();
  return { train: { ...mnist.train, source: 'the mnist package (training digits)' }, test: mnist.test, name: 'mnist package' };
}

/** The first `limit` examples of `test` (all of them when limit is undefined or larger). */
export function limitEvaluation<D extends Dataset>(test: D, limit: number | undefined): D {
  if (limit === undefined || limit >= test.count) return test;
  return selectExamples(test, Uint32Array.from({ length: limit }, (_, i) => i));
}

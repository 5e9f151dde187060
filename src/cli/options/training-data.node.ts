/**
 * The data a training command trains on, for `train` and `worker` alike:
 * the CMUdict words for the transformer, IDX files with --data, else the
 * bundled MNIST digits. `--eval-limit` keeps only the first examples of the
 * test (validation) set, for a quick run whose evaluation is only a glance.
 */
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { type Dataset, selectExamples } from '../../data/dataset.ts';
import { loadIdxSplit } from '../../data/idx.node.ts';
import { loadMnist } from '../../data/mnist.node.ts';
import { loadWords } from '../../data/words.node.ts';
import { textSource } from '../../data/text.node.ts';
import { cachedTokens } from '../../data/token-cache.node.ts';
import { splitTokens } from '../../data/text-split.ts';
import type { TokenizerName } from '../../data/tokenizer.ts';
import { rowFormatOf } from '../../data/rows.ts';
import { loadTable, type TableChoice } from '../../data/table.node.ts';
import { DEFAULT_TEXT_CONTEXT } from '../../data/text.ts';

export interface TrainingData {
  train: Dataset;
  test: Dataset;
  /** What the data is, for the lines a person reads. */
  name: string;
  /** --text: the text's SHA-256, its tokenizer and vocabulary's size, and its token cache (`built` when this run tokenized it). */
  text?: {
    sha256: string;
    vocabularySize: number;
    tokenizer: TokenizerName;
    tokens: number;
    cache: string;
    built?: { seconds: number };
  };
}

/** --text: a text file (or @brown) cut into windows of `context` tokens of `tokenizer` (undefined: its characters, or bytes). */
export interface TextChoice {
  path: string;
  context?: number;
  tokenizer?: TokenizerName;
}

export async function loadTrainingData(
  model: string,
  dataDir: string | undefined,
  text?: TextChoice,
  table: TableChoice = {},
): Promise<TrainingData> {
  if (dataDir && rowFormatOf(dataDir)) {
    if (model === 'transformer' || model === 'cnn')
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `--data ${dataDir} is a table of rows: train the mlp or a model file on it, not the ${model}`,
      );
    const t = loadTable(dataDir, table);
    return {
      train: t.train,
      test: t.test,
      name: `${dataDir}: ${t.train.count} training and ${t.test.count} test rows of ${t.features} features, ${t.classes} classes`,
    };
  }
  if (table.labels !== undefined || table.labelColumn !== undefined) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--labels and --label-column go with --data FILE.csv|.npy|.json (a table of rows)`,
    );
  }
  if (text) {
    if (model !== 'transformer')
      throw new RingtrainError(ErrorCode.InvalidArgument, `--text trains the transformer, not ${model}`);
    if (dataDir) throw new RingtrainError(ErrorCode.InvalidArgument, `--text and --data are two data sets; give one`);
    const source = textSource(text.path);
    const { cache, built } = await cachedTokens(source, text.tokenizer);
    const t = cache.header;
    const split = splitTokens(cache, t, text.context ?? DEFAULT_TEXT_CONTEXT, `--text ${text.path}`);
    const how = built
      ? `tokenized in ${built.seconds.toFixed(1)} s (${Math.round(cache.length / built.seconds)} tokens/s) into ${cache.path}`
      : `tokens read from ${cache.path}`;
    return {
      train: split.train,
      test: split.validation,
      name: `${source.name}: ${split.trainTokens} training and ${split.validationTokens} validation tokens of the ${t.name} tokenizer, a vocabulary of ${t.vocabSize}; ${how}`,
      text: {
        sha256: source.sha256,
        vocabularySize: t.vocabSize,
        tokenizer: t.name,
        tokens: cache.length,
        cache: cache.path,
        built,
      },
    };
  }
  if (model === 'transformer') {
    if (dataDir)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `--data gives IDX image files; the transformer trains on the CMUdict words, which come with it. Leave out --data ${dataDir}.`,
      );
    const words = await loadWords();
    return { train: words.train, test: words.validation, name: 'CMUdict words' };
  }
  // `source` names the data in a refusal (a model that reads another shape names it and both shapes).
  if (dataDir) {
    const [train, test] = await Promise.all([loadIdxSplit(dataDir, 'train'), loadIdxSplit(dataDir, 't10k')]);
    return { train: { ...train, source: `--data ${dataDir}` }, test, name: dataDir };
  }
  const mnist = await loadMnist();
  return {
    train: { ...mnist.train, source: 'the mnist package (training digits)' },
    test: mnist.test,
    name: 'mnist package',
  };
}

/** The first `limit` examples of `test` (all of them when limit is undefined or larger); a text's windows read from its cache now, and only those. */
export function limitEvaluation<D extends Dataset>(test: D, limit: number | undefined): D {
  if (limit === undefined || limit >= test.count)
    return test.stream
      ? selectExamples(
          test,
          Uint32Array.from({ length: test.count }, (_, i) => i),
        )
      : test;
  return selectExamples(
    test,
    Uint32Array.from({ length: limit }, (_, i) => i),
  );
}

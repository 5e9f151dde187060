/**
 * Initial weights in PyTorch's default scheme, and sampling words from a
 * model: what `ringtrain generate` and the tests use. Both are seeded with the
 * project's own generator, so they repeat in every runtime.
 */
import { mulberry32, type Random } from '../core/random.ts';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { decodeWord, WORD_VOCAB_SIZE } from '../data/words.ts';
import type { Tokenizer } from '../data/tokenizer.ts';
import { transformerDecoder } from './decode.ts';
import { transformerTensorShapes, type TransformerShape, type TransformerWeights } from './transformer.ts';

/** A standard normal draw (Box–Muller; 1 − u keeps the log finite). */
function normal(random: Random): number {
  return Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
}

/**
 * Embeddings N(0, 1), LayerNorm weight 1 and bias 0, Linear weight and bias
 * U(−1/√in, 1/√in): PyTorch's defaults for nn.Embedding, nn.LayerNorm and
 * nn.Linear (the distributions, not PyTorch's random stream).
 */
export function initTransformerTensors(
  shape: TransformerShape,
  seed: number,
): Record<string, { shape: number[]; data: Float32Array }> {
  const random = mulberry32(seed);
  const out: Record<string, { shape: number[]; data: Float32Array }> = {};
  for (const [name, dims] of transformerTensorShapes(shape)) {
    const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
    const layer = name.slice(0, name.lastIndexOf('.'));
    if (layer === 'tok' || layer === 'pos') data.forEach((_, i) => (data[i] = normal(random)));
    else if (/ln\d?$|lnf$/.test(layer)) data.fill(name.endsWith('.weight') ? 1 : 0);
    else {
      // nn.Linear: the bound comes from the weight's input width, for its bias too.
      const fanIn = transformerTensorShapes(shape).find(([n]) => n === `${layer}.weight`)![1][1];
      const bound = 1 / Math.sqrt(fanIn);
      data.forEach((_, i) => (data[i] = (2 * random() - 1) * bound));
    }
    out[name] = { shape: dims, data };
  }
  return out;
}

export interface SampleOptions {
  count: number;
  /** Logits are divided by this before the softmax; 0 picks the most likely letter every time. */
  temperature?: number;
  seed?: number;
}

/** Index drawn from softmax(logits[row] / temperature), or the argmax at temperature 0. */
function drawToken(
  logits: Float64Array,
  row: number,
  vocab: number,
  temperature: number,
  random: Random,
  allowEnd: boolean,
): number {
  const first = allowEnd ? 0 : 1;
  if (temperature === 0) {
    let best = first;
    for (let c = first; c < vocab; c++) if (logits[row * vocab + c] > logits[row * vocab + best]) best = c;
    return best;
  }
  let max = -Infinity;
  for (let c = first; c < vocab; c++) max = Math.max(max, logits[row * vocab + c] / temperature);
  const p = new Float64Array(vocab);
  let sum = 0;
  for (let c = first; c < vocab; c++) sum += p[c] = Math.exp(logits[row * vocab + c] / temperature - max);
  let u = random() * sum;
  for (let c = first; c < vocab; c++) {
    u -= p[c];
    if (u < 0) return c;
  }
  return vocab - 1; // u landed on the rounding error at the very top
}

/**
 * Words sampled one letter at a time from `\n` until the model ends the word
 * (token 0) or the context is full. The first letter never ends the word:
 * every training word has at least one letter, so an empty line is no sample.
 */
export function sampleWords(w: TransformerWeights, opts: SampleOptions): string[] {
  if (w.shape.vocab !== WORD_VOCAB_SIZE) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `this model has ${w.shape.vocab} tokens; words are spelled with ${WORD_VOCAB_SIZE} (\\n and a–z).`,
      { vocab: w.shape.vocab },
    );
  }
  const temperature = opts.temperature ?? 1;
  if (!(temperature >= 0) || !Number.isFinite(temperature)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `temperature ${temperature}: give a finite number ≥ 0 (0 = always the likeliest letter).`,
      { temperature },
    );
  }
  const random = mulberry32(opts.seed ?? 0);
  const words: string[] = [];
  for (let n = 0; n < opts.count; n++) {
    const tokens = [0];
    const decoder = transformerDecoder(w);
    let logits = decoder.push(0);
    while (true) {
      const next = drawToken(logits, 0, w.shape.vocab, temperature, random, tokens.length > 1);
      if (next === 0) break;
      tokens.push(next);
      if (tokens.length === w.shape.context) break; // the context is full: the word ends here
      logits = decoder.push(next);
    }
    words.push(decodeWord(tokens.slice(1)));
  }
  return words;
}

export interface TextSampleOptions {
  /** Text the sample continues (it is part of the result); for char and byte, only symbols of the vocabulary. */
  prompt: string;
  /** Tokens to sample after the prompt (characters, bytes or GPT-2 tokens, as the model's tokenizer has them). */
  length: number;
  temperature?: number;
  seed?: number;
}

/**
 * A text model's continuation of `prompt`, one token at a time. Past the
 * context the window slides: when it is full, a fresh decoder is fed the last
 * three quarters of it (a refill every quarter context keeps the cost at a few
 * positions per token, where re-reading the whole window every token would
 * cost `context`), so the model always sees at least 3/4 of its context.
 */
export function sampleText(
  w: TransformerWeights,
  tokenizer: Pick<Tokenizer, 'name' | 'vocabSize' | 'encode' | 'decode'>,
  opts: TextSampleOptions,
): string {
  if (w.shape.vocab !== tokenizer.vocabSize) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `this model has ${w.shape.vocab} tokens but its ${tokenizer.name} tokenizer ${tokenizer.vocabSize}; the checkpoint is damaged.`,
      { vocab: w.shape.vocab, tokenizer: tokenizer.vocabSize },
    );
  }
  const temperature = opts.temperature ?? 1;
  if (!(temperature >= 0) || !Number.isFinite(temperature)) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `temperature ${temperature}: give a finite number ≥ 0 (0 = always the likeliest character).`,
      { temperature },
    );
  }
  const tokens = Array.from(tokenizer.encode(opts.prompt));
  if (tokens.length === 0)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      'the prompt is empty; give at least one character for the model to continue.',
    );
  const { context } = w.shape;
  const keep = Math.max(1, context - Math.max(1, Math.floor(context / 4)));
  const random = mulberry32(opts.seed ?? 0);
  let decoder = transformerDecoder(w);
  let logits!: Float64Array;
  const refill = (n: number) => {
    decoder = transformerDecoder(w);
    for (const t of tokens.slice(-n)) logits = decoder.push(t);
  };
  refill(context);
  for (let n = 0; n < opts.length; n++) {
    const next = drawToken(logits, 0, w.shape.vocab, temperature, random, true);
    tokens.push(next);
    if (decoder.length === context) refill(keep);
    else logits = decoder.push(next);
  }
  return tokenizer.decode(tokens);
}

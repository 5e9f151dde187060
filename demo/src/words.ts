/**
 * The transformer's panel: words sampled from the weights this tab holds now
 * (a job's, refreshed after each evaluation and at the end, whatever this
 * tab's rank). Sampling runs the model on this tab's GPU one letter at a
 * time: feed `\n` and the letters so far, draw the next letter from the
 * softmax of the last position's logits, stop at end-of-word (id 0).
 */
import { mulberry32, type Random } from '../../src/data/random.ts';
import { decodeWord, WORD_CONTEXT, WORD_VOCAB_SIZE } from '../../src/data/words.ts';
import { h } from './dom.ts';
import type { Predictor } from './predict.ts';

export interface WordsPanel {
  element: HTMLElement;
  /** Sample from this model from now on (it replaces the one before). */
  attach(model: Predictor): void;
}

const COUNT = 8;

/** A letter id drawn from softmax(logits / temperature); the first letter may not end the word. */
function drawLetter(logits: Float32Array, at: number, allowEnd: boolean, temperature: number, random: Random): number {
  const row = logits.subarray(at * WORD_VOCAB_SIZE, (at + 1) * WORD_VOCAB_SIZE);
  const first = allowEnd ? 0 : 1;
  let max = -Infinity;
  for (let c = first; c < row.length; c++) max = Math.max(max, row[c] / temperature);
  const p = new Float64Array(row.length);
  let sum = 0;
  for (let c = first; c < row.length; c++) sum += p[c] = Math.exp(row[c] / temperature - max);
  let u = random() * sum;
  for (let c = first; c < row.length; c++) if ((u -= p[c]) < 0) return c;
  return row.length - 1;
}

/** `count` words sampled from `model` (a causal model: position t's logits depend on tokens 0..t only). */
export async function sampleWordsOnGpu(
  model: Predictor,
  count: number,
  temperature: number,
  seed: number,
): Promise<string[]> {
  const random = mulberry32(seed);
  const words: string[] = [];
  for (let n = 0; n < count; n++) {
    const tokens = new Float32Array(WORD_CONTEXT); // `\n` (0) then the letters; the rest is padding the causal mask ignores
    let length = 1;
    while (length < WORD_CONTEXT) {
      const logits = await model.predict(tokens, 1);
      const next = drawLetter(logits, length - 1, length > 1, temperature, random);
      if (next === 0) break;
      tokens[length++] = next;
    }
    words.push(decodeWord(Array.from(tokens.subarray(1, length))));
  }
  return words;
}

export function wordsPanel(): WordsPanel {
  const status = h(
    'p',
    { class: 'intro', 'data-testid': 'words-status' },
    'Words the model spells with the weights this tab holds now.',
  );
  const temperature = h('input', {
    type: 'number',
    min: '0.1',
    max: '3',
    step: '0.1',
    value: '1',
    'data-testid': 'words-temperature',
    'aria-label': 'Temperature',
  });
  const generate = h('button', { type: 'button', 'data-testid': 'generate', disabled: true }, 'Generate');
  const list = h('ol', { class: 'words', 'data-testid': 'words', 'aria-live': 'polite' });
  const element = h(
    'section',
    { class: 'card', 'data-testid': 'words-panel', 'aria-labelledby': 'words-title', hidden: true },
    h('h2', { id: 'words-title' }, 'Generate words'),
    status,
    h('div', { class: 'controls' }, h('label', {}, 'Temperature ', temperature), generate),
    list,
  );
  let model: Predictor | null = null;
  let seed = 1;
  let busy = false;

  async function run(): Promise<void> {
    if (!model || busy) return;
    busy = true;
    generate.disabled = true;
    try {
      const t = Math.min(3, Math.max(0.1, Number(temperature.value) || 1));
      const words = await sampleWordsOnGpu(model, COUNT, t, seed++);
      list.replaceChildren(...words.map((w) => h('li', {}, w)));
      element.dataset.state = 'generated';
    } catch (err) {
      status.textContent = `Generating failed: ${err instanceof Error ? err.message : String(err)}`;
    } finally {
      busy = false;
      generate.disabled = false;
    }
  }
  generate.addEventListener('click', () => void run());

  return {
    element,
    attach(m) {
      if (m.classes !== WORD_VOCAB_SIZE) {
        status.textContent = `This model has ${m.classes} outputs; words need ${WORD_VOCAB_SIZE} (\\n and a–z).`;
        return;
      }
      model = m;
      element.hidden = false;
      generate.disabled = busy;
      element.dataset.state = 'attached';
    },
  };
}

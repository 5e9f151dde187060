/**
 * A text job's panel: a continuation of a prompt, sampled from the weights
 * this tab holds now (the job's, refreshed after each evaluation and at the
 * end, whatever this tab's rank). The weights are read back once per click
 * and sampled by the CPU decoder `ringtrain generate` uses (src/reference),
 * with a cache of keys and values: a few hundred characters cost a small
 * model milliseconds there, where running the GPU model once per character
 * over the whole window would cost a read-back each.
 */
import type { Dataset } from '../../src/data/dataset.ts';
import { type Tokenizer, tokenizerFromRecord } from '../../src/data/tokenizer.ts';
import type { Model } from '../../src/engine/model.ts';
import { stateDict } from '../../src/engine/weights.ts';
import { sampleText } from '../../src/reference/sample.ts';
import { transformerWeights, WORDS_TRANSFORMER } from '../../src/reference/transformer.ts';
import { h } from './dom.ts';

export interface TextPanel {
  element: HTMLElement;
  /** Sample from this model from now on (it replaces the one before); `test` is the job's validation text. */
  attach(model: Model, test: Dataset): void;
}

/** Tokens sampled per click (characters with the char tokenizer). */
const LENGTH = 200;
/** Tokens of the validation text offered as the first prompt. */
const PROMPT_LENGTH = 24;

export function textPanel(): TextPanel {
  const status = h(
    'p',
    { class: 'intro', 'data-testid': 'text-status' },
    'A continuation the model writes with the weights this tab holds now.',
  );
  const prompt = h('input', { type: 'text', 'data-testid': 'text-prompt', 'aria-label': 'Prompt', size: '32' });
  const temperature = h('input', {
    type: 'number',
    min: '0',
    max: '3',
    step: '0.1',
    value: '0.8',
    'data-testid': 'text-temperature',
    'aria-label': 'Temperature',
  });
  const generate = h('button', { type: 'button', 'data-testid': 'text-generate', disabled: true }, 'Continue');
  const shownPrompt = h('strong', {});
  const continuation = h('span', { 'data-testid': 'text-continuation' });
  const sample = h(
    'pre',
    { class: 'text-sample', 'data-testid': 'text-sample', 'aria-live': 'polite' },
    shownPrompt,
    continuation,
  );
  const element = h(
    'section',
    { class: 'card', 'data-testid': 'text-panel', 'aria-labelledby': 'text-title', hidden: true },
    h('h2', { id: 'text-title' }, 'Continue a text'),
    status,
    h(
      'div',
      { class: 'controls' },
      h('label', {}, 'Prompt ', prompt),
      h('label', {}, 'Temperature ', temperature),
      generate,
    ),
    sample,
  );
  let model: Model | null = null;
  let vocabulary: Tokenizer | null = null;
  let seed = 1;
  let busy = false;

  async function run(): Promise<void> {
    if (!model || !vocabulary || busy) return;
    busy = true;
    generate.disabled = true;
    try {
      const heads = typeof model.spec.heads === 'number' ? model.spec.heads : WORDS_TRANSFORMER.heads;
      const weights = transformerWeights(await stateDict(model), heads, 'this tab’s weights');
      const t = Math.min(3, Math.max(0, Number(temperature.value) || 0));
      const text = sampleText(weights, vocabulary, {
        prompt: prompt.value,
        length: LENGTH,
        temperature: t,
        seed: seed++,
      });
      shownPrompt.textContent = prompt.value;
      continuation.textContent = text.slice(prompt.value.length);
      status.textContent = 'A continuation the model writes with the weights this tab holds now.';
      element.dataset.state = 'generated';
    } catch (err) {
      // A prompt with a character the text never had, above all: the message names it.
      status.textContent = `Continuing failed: ${err instanceof Error ? err.message : String(err)}`;
      element.dataset.state = 'failed';
    } finally {
      busy = false;
      generate.disabled = false;
    }
  }
  generate.addEventListener('click', () => void run());

  return {
    element,
    attach(m, test) {
      model = m;
      // The job's tokenizer (gpt2 loads once, asynchronously); the first prompt is the start of the validation text.
      void tokenizerFromRecord(test.vocabulary!, 'the job’s text').then(
        (tokenizer) => {
          const first = vocabulary === null;
          vocabulary = tokenizer;
          if (first)
            prompt.value = tokenizer.decode(
              Array.from(test.inputs.subarray(0, Math.min(PROMPT_LENGTH, test.inputSize))),
            );
          element.hidden = false;
          generate.disabled = busy;
          element.dataset.state = 'attached';
        },
        (err: unknown) => {
          status.textContent = `This job's tokenizer did not load: ${err instanceof Error ? err.message : String(err)}`;
          element.hidden = false;
          element.dataset.state = 'failed';
        },
      );
    },
  };
}

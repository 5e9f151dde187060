/**
 * Each built-in model's training recipe: what a flag the user did not give
 * means for that model. The transformer's is the words workload
 * (AdamW β 0.9/0.999, ε 1e-8, weight decay 0.01, lr 3e-3 with 100 warm-up
 * steps from zero then cosine to zero at the last step, 256 words per step
 * drawn with replacement, 1,000 steps), the settings the PyTorch reference
 * was measured at. The CNN's is cosine decay at 32 examples per step (8 per peer
 * at -np 4) with the optimizer's own learning rate: `run -np 4 --model cnn` with
 * no other flag reaches 97% in 3 epochs (test/launcher/cnn-accuracy.test.ts),
 * where a constant rate at batch 64 stopped at 96.05% after 5. The MLP keeps the
 * options' own defaults.
 */
import type { Command } from 'commander';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';

export interface Recipe {
  /** Option values, as the command line would give them (strings), by commander's attribute name. */
  options: Record<string, string>;
  /** Steps of linear warm-up from zero. */
  warmupSteps: number;
  sampling: 'epochs' | 'replacement';
}

export const RECIPES: Record<string, Recipe> = {
  cnn: {
    options: { batch: '32', lrSchedule: 'cosine' },
    warmupSteps: 0,
    sampling: 'epochs',
  },
  transformer: {
    options: {
      optimizer: 'adamw',
      batch: '256',
      lr: '0.003',
      weightDecay: '0.01',
      steps: '1000',
      lrSchedule: 'cosine',
    },
    warmupSteps: 100,
    sampling: 'replacement',
  },
  // --text: the words' recipe at 32 windows a step. A window of 64 characters counts 64 targets
  // where a word counts about 9, so 32 windows carry about as many targets as 256 words.
  text: {
    options: { optimizer: 'adamw', batch: '32', lr: '0.003', weightDecay: '0.01', steps: '1000', lrSchedule: 'cosine' },
    warmupSteps: 100,
    sampling: 'replacement',
  },
};

/** Whether the user gave option `key` (not commander's default, nor left unset). */
function givenByUser(cmd: Command, key: string): boolean {
  return ![undefined, 'default'].includes(cmd.getOptionValueSource(key));
}

/**
 * `--text FILE` trains the transformer (the model follows from the data): a
 * --model other than transformer is refused; `--context` belongs to --text.
 */
export function withTextModel(cmd: Command, raw: Record<string, unknown>): Record<string, unknown> {
  const given = (key: string) => givenByUser(cmd, key);
  if (raw.text === undefined) {
    if (raw.context !== undefined)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        '--context sets the window of a --text run; add --text FILE or drop --context (the words transformer reads 32 positions)',
      );
    if (raw.tokenizer !== undefined)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `--tokenizer ${String(raw.tokenizer)} tokenizes a --text; add --text FILE or drop --tokenizer`,
      );
    return raw;
  }
  if (given('model') && raw.model !== 'transformer') {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--text trains the character-level transformer, not --model ${String(raw.model)}; drop --model (or pass --model transformer)`,
      { model: raw.model },
    );
  }
  if (raw.data !== undefined)
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `--text and --data are two data sets; give one (--data ${String(raw.data)} is for the image models)`,
    );
  return { ...raw, model: 'transformer' };
}

/** The recipe options that hold only with the recipe's own optimizer. */
const TUNED_FOR_OPTIMIZER = ['lr', 'weightDecay'];

/** `raw` with the model's recipe filling every option the user left at commander's default (or unset). */
export function withRecipe(
  cmd: Command,
  raw: Record<string, unknown>,
): { raw: Record<string, unknown>; recipe: Recipe | undefined } {
  const recipe = RECIPES[raw.text !== undefined ? 'text' : String(raw.model)];
  if (!recipe) return { raw, recipe };
  const out = { ...raw };
  const unset = (key: string) => !givenByUser(cmd, key);
  // A recipe's learning rate and weight decay were tuned for its optimizer: with another one
  // (--optimizer lion on the words workload) that optimizer's own defaults apply instead, as Lion's
  // lr must be several times smaller than AdamW's.
  const ownOptimizer =
    recipe.options.optimizer === undefined || unset('optimizer') || raw.optimizer === recipe.options.optimizer;
  for (const [key, value] of Object.entries(recipe.options)) {
    if (!ownOptimizer && TUNED_FOR_OPTIMIZER.includes(key)) continue;
    if (unset(key)) out[key] = value;
  }
  return { raw: out, recipe };
}

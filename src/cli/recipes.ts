/**
 * Each built-in model's training recipe: what a flag the user did not give
 * means for that model. The transformer's is the words workload of issue 9
 * (AdamW β 0.9/0.999, ε 1e-8, weight decay 0.01, lr 3e-3 with 100 warm-up
 * steps from zero then cosine to zero at the last step, 256 words per step
 * drawn with replacement, 1,000 steps), the settings the PyTorch reference
 * was measured at; the MLP and CNN keep the options' own defaults.
 */
import type { Command } from 'commander';

export interface Recipe {
  /** Option values, as the command line would give them (strings), by commander's attribute name. */
  options: Record<string, string>;
  /** Steps of linear warm-up from zero. */
  warmupSteps: number;
  sampling: 'epochs' | 'replacement';
}

export const RECIPES: Record<string, Recipe> = {
  transformer: {
    options: { optimizer: 'adamw', batch: '256', lr: '0.003', weightDecay: '0.01', steps: '1000', lrSchedule: 'cosine' },
    warmupSteps: 100,
    sampling: 'replacement',
  },
};

/** `raw` with the model's recipe filling every option the user left at commander's default (or unset). */
export function withRecipe(cmd: Command, raw: Record<string, unknown>): { raw: Record<string, unknown>; recipe: Recipe | undefined } {
  const recipe = RECIPES[String(raw.model)];
  if (!recipe) return { raw, recipe };
  const out = { ...raw };
  for (const [key, value] of Object.entries(recipe.options)) {
    const source = cmd.getOptionValueSource(key);
    if (source === undefined || source === 'default') out[key] = value;
  }
  return { raw: out, recipe };
}

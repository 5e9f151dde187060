/**
 * `ringtrain generate --checkpoint X [--count 20] [--temperature 1] [--seed 0]`:
 * words sampled from a trained transformer, one per line on stdout. Runs the
 * CPU reference forward pass (src/reference/), so it needs no GPU: 20 words
 * of a 105k-parameter model take well under a second.
 *
 * A checkpoint of `train --text` records its tokenizer (its `vocabulary`):
 * then generate continues `--prompt` by `--length` tokens of it instead
 * (characters, bytes or GPT-2 tokens) and prints them decoded.
 */
import { Command } from 'commander';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { type Tokenizer, tokenizerFromRecord } from '../../data/tokenizer.ts';
import { sampleText, sampleWords } from '../../reference/sample.ts';
import { loadTransformerFile } from '../../reference/weights.node.ts';
import { printLine } from '../host.node.ts';

function number(raw: string, flag: string, check: (v: number) => boolean, what: string): number {
  const v = Number(raw);
  if (raw.trim() === '' || !check(v))
    throw new RingtrainError(ErrorCode.InvalidArgument, `${flag} ${JSON.stringify(raw)}: give ${what}.`, {
      flag,
      value: raw,
    });
  return v;
}

/** Whether the tokenizer has tokens for `text` (a char vocabulary may lack a newline). */
function encodes(tokenizer: Tokenizer, text: string): boolean {
  try {
    tokenizer.encode(text);
    return true;
  } catch {
    return false;
  }
}

export function generateCommand(): Command {
  return new Command('generate')
    .description(
      'sample words from a transformer checkpoint (a --model transformer --save file, or a PyTorch state dict in safetensors), or text from a --text one',
    )
    .requiredOption('--checkpoint <file>', 'the safetensors file')
    .option('--count <n>', 'how many words', '20')
    .option(
      '--temperature <t>',
      'divide the logits by t before sampling: below 1 likelier words, above 1 stranger ones; 0 always takes the likeliest letter',
      '1',
    )
    .option('--seed <s>', 'sampling seed: the same seed gives the same words', '0')
    .option('--heads <h>', 'attention heads (default: from the checkpoint, else 4)')
    .option('--prompt <text>', 'a --text model: the text to continue (default: a newline, when the vocabulary has one)')
    .option(
      '--length <n>',
      'a --text model: tokens to sample after the prompt (characters with the char tokenizer)',
      '200',
    )
    .action(
      async (o: {
        checkpoint: string;
        count: string;
        temperature: string;
        seed: string;
        heads?: string;
        prompt?: string;
        length: string;
      }) => {
        const count = number(
          o.count,
          '--count',
          (v) => Number.isInteger(v) && v >= 1,
          'a whole number of words, at least 1',
        );
        const temperature = number(o.temperature, '--temperature', (v) => Number.isFinite(v) && v >= 0, 'a number ≥ 0');
        const seed = number(o.seed, '--seed', (v) => Number.isInteger(v), 'an integer');
        const heads =
          o.heads === undefined
            ? undefined
            : number(o.heads, '--heads', (v) => Number.isInteger(v) && v >= 1, 'a whole number of heads');
        const { weights, metadata } = loadTransformerFile(o.checkpoint, heads);
        if (metadata.vocabulary !== undefined) {
          const tokenizer = await tokenizerFromRecord(metadata.vocabulary, o.checkpoint);
          const length = number(o.length, '--length', (v) => Number.isInteger(v) && v >= 0, 'a whole number of tokens');
          if (o.prompt === undefined && !encodes(tokenizer, '\n'))
            throw new RingtrainError(
              ErrorCode.InvalidArgument,
              `${o.checkpoint}'s text has no newline to start from; give --prompt with some of its characters.`,
            );
          const prompt = o.prompt ?? '\n';
          const text = sampleText(weights, tokenizer, { prompt, length, temperature, seed });
          // The default newline prompt is no part of what the model wrote.
          await printLine(o.prompt === undefined ? text.slice(1) : text);
          return;
        }
        if (o.prompt !== undefined)
          throw new RingtrainError(
            ErrorCode.InvalidArgument,
            `${o.checkpoint} is a words model (no text vocabulary in it); --prompt is for a model trained with --text.`,
          );
        for (const word of sampleWords(weights, { count, temperature, seed })) await printLine(word);
      },
    );
}

/**
 * `ringtrain predict --checkpoint F --input ROWS [--json] [--logits]`: a
 * trained model's outputs for rows of features (JSON, CSV or NPY), in eval mode
 * (Dropout off). The model is rebuilt from what the checkpoint records
 * (`model_spec`): a built-in one by itself, a model file's when `--model` names
 * the file; its weights are checked tensor by tensor before they load. Rows
 * whose width is not the model's input are refused naming the file, the model
 * and both shapes. The training file itself is taken too: its label column is
 * left out, and a model trained on class names prints the names
 * (predict-input.ts). A language model (the transformer) reads rows of 1 to
 * context token ids instead and answers each row's next token, with the
 * logits at its last position. Runs in the current runtime: a handful of rows needs no
 * choice of the fastest one.
 */
import { Command, Option } from 'commander';
import { readFile } from 'node:fs/promises';
import { CHECKPOINT_FORMAT, decodeCheckpoint } from '../../checkpoint/checkpoint.ts';
import { decodeSafetensors, type Metadata, type NamedTensors } from '../../checkpoint/safetensors.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { rowFormatOf, type RowFormat } from '../../data/rows.ts';
import { createModel } from '../../engine/create.ts';
import { isModelFile, modelFromFactory } from '../../engine/define.ts';
import { loadModelFile } from '../../engine/model-file.node.ts';
import type { Model, ModelSpec } from '../../engine/model.ts';
import { isLanguageModel, predict, predictNextTokens } from '../../engine/predict.ts';
import { loadStateDict } from '../../engine/weights.ts';
import { acquireGpu } from '../../gpu/device.ts';
import type { Gpu } from '../../gpu/gpu.ts';
import { printLine } from '../host.node.ts';
import { classNamesOf, predictRows } from './predict-input.ts';

const BUILT_IN = ['mlp', 'cnn', 'transformer'];

async function read(path: string, what: string): Promise<Uint8Array> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new RingtrainError(
      ErrorCode.InvalidArgument,
      `cannot read ${what} ${path} (${(err as Error).message})`,
      { path },
      { cause: err },
    );
  }
}

/** The weights and the model spec a checkpoint (--save) or an exported state dict records. */
export function weightsOf(
  bytes: Uint8Array,
  file: string,
): { params: NamedTensors; spec: { kind: string } & Record<string, unknown>; metadata: Metadata } {
  const { tensors, metadata } = decodeSafetensors(bytes, file);
  const params = metadata.format === CHECKPOINT_FORMAT ? decodeCheckpoint(bytes, file).params : tensors;
  let spec: unknown = undefined;
  if (metadata.model_spec) {
    try {
      spec = JSON.parse(metadata.model_spec);
    } catch {
      spec = undefined;
    }
  }
  if (typeof spec !== 'object' || spec === null || typeof (spec as { kind?: unknown }).kind !== 'string') {
    if (!metadata.model)
      throw new RingtrainError(
        ErrorCode.BadCheckpoint,
        `${file} records no model (no model_spec or model in its metadata); it was not written by ringtrain train/run --save or ringtrain export`,
        { file },
      );
    spec = { kind: metadata.model };
  }
  return { params, spec: spec as { kind: string } & Record<string, unknown>, metadata };
}

/** Builds the model a checkpoint was saved from and loads its weights (checked by name and shape); with the checkpoint's metadata. */
export async function modelForCheckpoint(
  gpu: Gpu,
  file: string,
  o: { model?: string; modelOptions?: Record<string, unknown> } = {},
): Promise<{ model: Model; metadata: Metadata }> {
  const { params, spec, metadata } = weightsOf(await read(file, 'checkpoint'), file);
  const { kind, seed: _seed, ...recorded } = spec;
  let model: Model;
  if (o.model !== undefined && isModelFile(o.model)) {
    const { name, factory } = await loadModelFile(o.model);
    model = modelFromFactory(gpu, factory, { name, options: o.modelOptions ?? recorded });
  } else {
    const builtIn = o.model ?? kind;
    if (!BUILT_IN.includes(builtIn)) {
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${file} holds the model ${kind}, built from a model file; pass --model with that file (--model ./${kind.replace(/@[0-9a-f]{8}$/, '')}.ts)`,
        { file, model: kind },
      );
    }
    model = createModel(gpu, (builtIn === kind ? spec : { kind: builtIn }) as unknown as ModelSpec);
  }
  try {
    loadStateDict(model, params, file);
  } catch (err) {
    model.destroy();
    throw err;
  }
  return { model, metadata };
}

/** A language model's answer: each row's next token (and, with --json or --logits, the logits at its last position). */
async function printNextTokens(model: Model, rows: number[][], o: PredictCommandOptions): Promise<void> {
  const result = await predictNextTokens(model, rows, { source: o.input });
  model.destroy();
  if (o.json) {
    await printLine(
      JSON.stringify({
        model: model.identity.name,
        checkpoint: o.checkpoint,
        input: o.input,
        rows: rows.length,
        next_tokens: result.nextTokens,
        logits: result.logits.map((l) => Array.from(l)),
      }),
    );
    return;
  }
  for (let i = 0; i < rows.length; i++) {
    await printLine(
      o.logits
        ? `${result.nextTokens[i]}\t${Array.from(result.logits[i], (v) => v.toPrecision(6)).join(',')}`
        : String(result.nextTokens[i]),
    );
  }
}

interface PredictCommandOptions {
  checkpoint: string;
  input: string;
  format?: RowFormat;
  model?: string;
  labelColumn?: string;
  json?: boolean;
  logits?: boolean;
}

/** A classifier's answer: each row's classes, named where the checkpoint records names (and, with --json or --logits, the logits). */
async function printClasses(
  model: Model,
  rows: number[][],
  o: PredictCommandOptions,
  names: readonly string[] | undefined,
): Promise<void> {
  const result = await predict(model, rows, { source: o.input });
  model.destroy();
  // A class's name where the checkpoint records names (a label column of names), else its number.
  const named = (c: number) => names?.[c] ?? String(c);
  if (o.json) {
    const labels = names ? { class_names: names, labels: result.classes.map(named) } : {};
    await printLine(
      JSON.stringify({
        model: model.identity.name,
        checkpoint: o.checkpoint,
        input: o.input,
        rows: rows.length,
        classes: result.classes,
        ...labels,
        logits: result.logits.map((l) => Array.from(l)),
      }),
    );
    return;
  }
  const perRow = result.classes.length / rows.length;
  for (let i = 0; i < rows.length; i++) {
    const cls = result.classes
      .slice(i * perRow, (i + 1) * perRow)
      .map(named)
      .join(' ');
    await printLine(o.logits ? `${cls}\t${Array.from(result.logits[i], (v) => v.toPrecision(6)).join(',')}` : cls);
  }
}

export function predictCommand(): Command {
  return new Command('predict')
    .description("a trained model's classes (and logits) for rows of features, in eval mode (dropout off)")
    .requiredOption('--checkpoint <file>', 'a checkpoint that --save wrote, or a state dict from ringtrain export')
    .requiredOption(
      '--input <file>',
      'rows of features: .json (an array of rows), .csv (one row per line) or .npy (a 2-D array)',
    )
    .addOption(
      new Option('--format <kind>', 'the input format, when the file name does not say it').choices([
        'json',
        'csv',
        'npy',
      ]),
    )
    .option(
      '--model <file>',
      'the model file (or the training script that exports its model) the checkpoint was trained from; built-in models need none',
    )
    .option(
      '--label-column <name>',
      "a column of --input to leave out (the training file's labels; by default the column the checkpoint records, when the file has it)",
    )
    .option('--json', 'one JSON line: the model, the classes and the logits of every row')
    .option('--logits', "print every row's logits after its class")
    .action(async (o: PredictCommandOptions) => {
      const format = o.format ?? rowFormatOf(o.input);
      if (!format)
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `--input ${o.input}: cannot tell its format from the name; name it .json, .csv or .npy, or pass --format json|csv|npy`,
          { path: o.input },
        );
      const input = await read(o.input, 'input');
      const gpu = await acquireGpu();
      try {
        const { model, metadata } = await modelForCheckpoint(gpu, o.checkpoint, { model: o.model });
        const language = isLanguageModel(model);
        // A refusal here leaves the model to gpu.destroy() below, as a refusal of predict() does.
        // A language model's rows are token ids: no label column to leave out, and no class names.
        const rows = predictRows(input, o.input, format, {
          labelColumn: o.labelColumn,
          recorded: language ? undefined : metadata.label_column,
          inputSize: model.inputSize,
        });
        if (language) {
          await printNextTokens(model, rows, o);
          return;
        }
        await printClasses(model, rows, o, classNamesOf(metadata, o.checkpoint));
      } finally {
        gpu.destroy();
      }
    });
}

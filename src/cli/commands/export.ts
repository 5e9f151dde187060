/**
 * `ringtrain export --checkpoint X --out Y`: the model's weights alone, as the
 * state dict of the equivalent PyTorch module (docs/MODELS.md), so that
 * `model.load_state_dict(safetensors.torch.load_file(Y))` loads them.
 * `--format hf-gpt2` writes a GPT-2-architecture transformer in Hugging Face's
 * GPT-2 layout instead (wte, wpe, h.N.…, ln_f; Conv1D weights [in, out]; F32),
 * the layout `train --init-from` reads.
 *
 * A training checkpoint keeps weights (`param/<state-dict key>`) and optimizer
 * state (`optim/<key>`) in one file, so that a save stays one atomic rename;
 * PyTorch's strict load refuses the optimizer's extra keys, hence this command.
 */
import { Command, Option } from 'commander';
import { resolve } from 'node:path';
import { hfGpt2FromParams } from '../../checkpoint/hf-gpt2.ts';
import { encodeSafetensors } from '../../checkpoint/safetensors.ts';
import { loadCheckpoint, writeFileAtomic } from '../../checkpoint/file.node.ts';
import { ErrorCode, RingtrainError } from '../../core/errors.ts';
import { printLine, stderr } from '../host.node.ts';

export const EXPORT_FORMATS = ['pytorch', 'hf-gpt2'] as const;

export function exportCommand(): Command {
  return new Command('export')
    .description(
      "write a checkpoint's weights as a PyTorch state dict in safetensors (no optimizer state): load_state_dict(safetensors.torch.load_file(out))",
    )
    .requiredOption('--checkpoint <file>', 'a checkpoint that --save wrote')
    .requiredOption('--out <file>', 'where to write the state dict')
    .addOption(
      new Option(
        '--format <kind>',
        "pytorch: the module's state dict (docs/MODELS.md); hf-gpt2: Hugging Face's GPT-2 layout, for a transformer of GPT-2's architecture",
      )
        .choices([...EXPORT_FORMATS])
        .default('pytorch'),
    )
    .action(async (o: { checkpoint: string; out: string; format: (typeof EXPORT_FORMATS)[number] }) => {
      if (resolve(o.checkpoint) === resolve(o.out)) {
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `--out is the checkpoint itself (${o.out}); exporting over it would lose the optimizer state. Give another file.`,
          { path: o.out },
        );
      }
      const c = loadCheckpoint(o.checkpoint);
      if (o.format === 'hf-gpt2' && c.model !== 'transformer') {
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `${o.checkpoint} holds a '${c.model}' model; --format hf-gpt2 writes a transformer of GPT-2's architecture (train --text).`,
          { file: o.checkpoint, model: c.model },
        );
      }
      const tensors = o.format === 'hf-gpt2' ? hfGpt2FromParams(c.params, o.checkpoint) : c.params;
      await printLine(
        `ringtrain: exporting ${Object.keys(tensors).length} tensors of the ${c.model} model at step ${c.step} to ${o.out}${o.format === 'hf-gpt2' ? " in Hugging Face's GPT-2 layout" : ''}`,
        stderr,
      );
      // transformers' safetensors loader wants format 'pt' in the metadata.
      const metadata: Record<string, string> =
        o.format === 'hf-gpt2'
          ? {
              format: 'pt',
              model: 'gpt2',
              ...(c.extra.model_spec ? { model_spec: c.extra.model_spec } : {}),
              step: String(c.step),
            }
          : {
              ...c.extra,
              format: 'pytorch-state-dict',
              model: c.model,
              step: String(c.step),
              layout_hash: c.layoutHash,
            };
      writeFileAtomic(o.out, encodeSafetensors(tensors, metadata));
    });
}

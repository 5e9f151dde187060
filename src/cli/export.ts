/**
 * `ringtrain export --checkpoint X --out Y`: the model's weights alone, as the
 * state dict of the equivalent PyTorch module (docs/MODELS.md), so that
 * `model.load_state_dict(safetensors.torch.load_file(Y))` loads them.
 *
 * A training checkpoint keeps weights (`param/<state-dict key>`) and optimizer
 * state (`optim/<key>`) in one file, so that a save stays one atomic rename;
 * PyTorch's strict load refuses the optimizer's extra keys, hence this command.
 */
import { Command } from 'commander';
import { resolve } from 'node:path';
import { encodeSafetensors } from '../checkpoint/safetensors.ts';
import { loadCheckpoint, writeFileAtomic } from '../checkpoint/file.node.ts';
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import { printLine, stderr } from './host.node.ts';

export function exportCommand(): Command {
  return new Command('export')
    .description("write a checkpoint's weights as a PyTorch state dict in safetensors (no optimizer state): load_state_dict(safetensors.torch.load_file(out))")
    .requiredOption('--checkpoint <file>', 'a checkpoint that --save wrote')
    .requiredOption('--out <file>', 'where to write the state dict')
    .action(async (o: { checkpoint: string; out: string }) => {
      if (resolve(o.checkpoint) === resolve(o.out)) {
        throw new RingtrainError(ErrorCode.InvalidArgument, `--out is the checkpoint itself (${o.out}); exporting over it would lose the optimizer state. Give another file.`, { path: o.out });
      }
      const c = loadCheckpoint(o.checkpoint);
      const names = Object.keys(c.params);
      await printLine(`ringtrain: exporting ${names.length} tensors of the ${c.model} model at step ${c.step} to ${o.out}`, stderr);
      writeFileAtomic(o.out, encodeSafetensors(c.params, { ...c.extra, format: 'pytorch-state-dict', model: c.model, step: String(c.step), layout_hash: c.layoutHash }));
    });
}

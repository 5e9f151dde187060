/**
 * A model's weights as named tensors (its state dict: the layout's names and
 * shapes, PyTorch's keys for the built-in models) and as safetensors bytes,
 * in every runtime. Loading checks every name and shape against the model
 * first, so a file of another model is refused naming the tensor.
 */
import { CHECKPOINT_FORMAT, decodeCheckpoint, flatParamsFor } from '../checkpoint/checkpoint.ts';
import { decodeSafetensors, encodeSafetensors, type Metadata, type NamedTensors } from '../checkpoint/safetensors.ts';
import type { Model } from './model.ts';

/** The model's weights by state-dict name (copies). */
export async function stateDict(model: Model): Promise<NamedTensors> {
  const flat = await model.readParams();
  const out: NamedTensors = {};
  for (const e of model.layout) out[e.name] = { shape: [...e.shape], data: flat.slice(e.offset, e.offset + e.length) };
  return out;
}

/** Writes named tensors into the model; every tensor of the model must be there with its shape, and nothing else. */
export function loadStateDict(model: Model, tensors: NamedTensors, file = 'state dict'): void {
  const c = {
    model: model.identity.name,
    optimizer: '',
    step: 0,
    epoch: 0,
    layoutHash: model.layoutHash,
    params: tensors,
    optimizerState: {},
    extra: {},
  };
  model.writeParams(
    flatParamsFor(c, { model: model.identity.name, layout: model.layout, flatLength: model.flatLength }, file),
  );
}

/** The weights as a safetensors file PyTorch's `load_state_dict(safetensors.torch.load_file(…))` takes. */
export async function saveSafetensors(model: Model, metadata: Metadata = {}): Promise<Uint8Array> {
  return encodeSafetensors(await stateDict(model), {
    ...metadata,
    format: 'pytorch-state-dict',
    model: model.identity.name,
    layout_hash: model.layoutHash,
  });
}

/** Loads a safetensors file into the model: a plain state dict (saveSafetensors, `ringtrain export`, PyTorch's) or a training checkpoint (`--save`). */
export function loadSafetensors(model: Model, bytes: Uint8Array, file = 'safetensors file'): void {
  const { tensors, metadata } = decodeSafetensors(bytes, file);
  loadStateDict(model, metadata.format === CHECKPOINT_FORMAT ? decodeCheckpoint(bytes, file).params : tensors, file);
}

/**
 * Hugging Face's GPT-2 layout (transformers' GPT2Model / GPT2LMHeadModel state
 * dict) to and from the 'gpt2' transformer's (src/engine/transformer.ts):
 *
 *   wte.weight [V, D]                 tok.weight [V, D]
 *   wpe.weight [P, D]                 pos.weight [P, D] (P positions, P ≥ the context)
 *   h.N.ln_1 / ln_2                   blocks.N.ln1 / ln2
 *   h.N.attn.c_attn.weight [D, 3D]    blocks.N.qkv.weight [3D, D]
 *   h.N.attn.c_proj.weight [D, D]     blocks.N.proj.weight [D, D]
 *   h.N.mlp.c_fc.weight [D, 4D]       blocks.N.fc.weight [4D, D]
 *   h.N.mlp.c_proj.weight [4D, D]     blocks.N.out.weight [D, 4D]
 *   ln_f                              lnf
 *
 * GPT-2's layers are Conv1D, whose weight is [in, out]: the transpose of
 * nn.Linear's [out, in], which ours are. Biases and LayerNorms map as they
 * are. A GPT2LMHeadModel file carries a `transformer.` prefix and may hold
 * `lm_head.weight`, which GPT-2 ties to wte (it must equal it); the attention
 * mask buffers (`h.N.attn.bias`, `h.N.attn.masked_bias`) are not weights.
 * A model of fewer positions than the file's wpe (one built without
 * `positions`, whose table has a row per context position) loads its first
 * rows; `--preset gpt2` keeps all 1,024 and loads wpe whole. A wpe of fewer
 * rows than the model's positions is refused, naming both shapes.
 */
import { ErrorCode, RingtrainError } from '../core/errors.ts';
import type { LayoutEntry } from './checkpoint.ts';
import type { NamedTensors, Tensor } from './safetensors.ts';

/** Our per-block names by GPT-2's, and whether the weight is a Conv1D (stored transposed). */
const BLOCK_TENSORS: [hf: string, ours: string, conv1d: boolean][] = [
  ['ln_1.weight', 'ln1.weight', false],
  ['ln_1.bias', 'ln1.bias', false],
  ['attn.c_attn.weight', 'qkv.weight', true],
  ['attn.c_attn.bias', 'qkv.bias', false],
  ['attn.c_proj.weight', 'proj.weight', true],
  ['attn.c_proj.bias', 'proj.bias', false],
  ['ln_2.weight', 'ln2.weight', false],
  ['ln_2.bias', 'ln2.bias', false],
  ['mlp.c_fc.weight', 'fc.weight', true],
  ['mlp.c_fc.bias', 'fc.bias', false],
  ['mlp.c_proj.weight', 'out.weight', true],
  ['mlp.c_proj.bias', 'out.bias', false],
];

const TOP_TENSORS: [hf: string, ours: string][] = [
  ['wte.weight', 'tok.weight'],
  ['wpe.weight', 'pos.weight'],
  ['ln_f.weight', 'lnf.weight'],
  ['ln_f.bias', 'lnf.bias'],
];

/** GPT-2's name of each of our tensors, and whether it is stored transposed. */
function hfNameOf(ours: string): { hf: string; conv1d: boolean } | undefined {
  const top = TOP_TENSORS.find(([, o]) => o === ours);
  if (top) return { hf: top[0], conv1d: false };
  const m = /^blocks\.(\d+)\.(.+)$/.exec(ours);
  const block = m && BLOCK_TENSORS.find(([, o]) => o === m[2]);
  return block ? { hf: `h.${m![1]}.${block[0]}`, conv1d: block[2] } : undefined;
}

/** [rows, cols] row-major → [cols, rows]. */
function transpose(data: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(data.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = data[r * cols + c];
  return out;
}

const shapeText = (s: readonly number[]) => `[${s.join(', ')}]`;
const IGNORED = /^h\.\d+\.attn\.(bias|masked_bias)$/;

/** The file's tensors without the `transformer.` prefix, the mask buffers and a tied lm_head (checked against wte). */
function gpt2Tensors(tensors: NamedTensors, file: string): Map<string, Tensor> {
  const out = new Map<string, Tensor>();
  let head: Tensor | undefined;
  for (const [raw, t] of Object.entries(tensors)) {
    const name = raw.startsWith('transformer.') ? raw.slice('transformer.'.length) : raw;
    if (name === 'lm_head.weight') head = t;
    else if (!IGNORED.test(name)) out.set(name, t);
  }
  const wte = out.get('wte.weight');
  if (head && wte && (head.data.length !== wte.data.length || head.data.some((v, i) => v !== wte.data[i]))) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${file}: lm_head.weight differs from wte.weight; GPT-2 ties its output layer to the token embedding, and so does ringtrain: give a file whose head is tied.`,
      { file, tensor: 'lm_head.weight' },
    );
  }
  return out;
}

/**
 * The flat parameter buffer of a 'gpt2' transformer (its `layout`) from a file
 * in GPT-2's layout. A missing tensor is refused by name; a tensor of another
 * shape naming it, its shape and the one the model needs; tensors the model
 * does not have (more layers, say) naming them.
 */
export function flatFromHfGpt2(
  tensors: NamedTensors,
  layout: readonly LayoutEntry[],
  flatLength: number,
  file: string,
): Float32Array {
  const theirs = gpt2Tensors(tensors, file);
  const flat = new Float32Array(flatLength);
  const used = new Set<string>();
  for (const e of layout) {
    const map = hfNameOf(e.name);
    if (!map)
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `the model's tensor '${e.name}' has no counterpart in GPT-2's layout; --init-from loads GPT-2's architecture only (--text, --preset gpt2).`,
        { tensor: e.name },
      );
    const t = theirs.get(map.hf);
    const [rows, cols] = e.shape;
    const want = map.conv1d ? [cols, rows] : [...e.shape];
    if (!t)
      throw new RingtrainError(
        ErrorCode.BadCheckpoint,
        `${file} has no tensor '${map.hf}' (the model needs it with shape ${shapeText(want)}); it is not a GPT-2 of this size.`,
        { file, tensor: map.hf, expectedShape: want },
      );
    used.add(map.hf);
    // Positions: a longer table loads its first rows (a model built with one row per context position).
    const fits =
      map.hf === 'wpe.weight'
        ? t.shape.length === 2 && t.shape[0] >= rows && t.shape[1] === cols
        : t.shape.length === want.length && t.shape.every((d, i) => d === want[i]);
    if (!fits) {
      throw new RingtrainError(
        ErrorCode.BadCheckpoint,
        `${file}: tensor '${map.hf}' has shape ${shapeText(t.shape)}, but this model needs ${shapeText(want)}${map.hf === 'wpe.weight' ? ' (at least that many positions)' : ''}; set --layers/--width/--heads (or --preset gpt2) to the file's GPT-2, and train on a vocabulary of its size.`,
        { file, tensor: map.hf, shape: [...t.shape], expectedShape: want },
      );
    }
    const values = map.conv1d ? transpose(t.data, cols, rows) : t.data.subarray(0, e.length);
    flat.set(values, e.offset);
  }
  const unknown = [...theirs.keys()].filter((n) => !used.has(n));
  if (unknown.length > 0) {
    throw new RingtrainError(
      ErrorCode.BadCheckpoint,
      `${file} has tensors this model does not: ${unknown
        .slice(0, 6)
        .map((n) => `${n} ${shapeText(theirs.get(n)!.shape)}`)
        .join(', ')}${unknown.length > 6 ? ', …' : ''}; is it a GPT-2 with more layers than --layers?`,
      { file, unknown },
    );
  }
  return flat;
}

/** A 'gpt2' transformer's weights (by our names) in GPT-2's layout, Conv1D weights transposed back to [in, out]. */
export function hfGpt2FromParams(params: NamedTensors, file = 'checkpoint'): NamedTensors {
  const out: NamedTensors = {};
  for (const [name, t] of Object.entries(params)) {
    const map = hfNameOf(name);
    if (!map) {
      const why = name.startsWith('head.')
        ? `it is a classic transformer (its own head layer); GPT-2's layout needs GPT-2's architecture (train with --text, which builds it, or --preset gpt2)`
        : 'GPT-2 has no such tensor';
      throw new RingtrainError(
        ErrorCode.InvalidArgument,
        `${file}: tensor '${name}' has no place in GPT-2's layout: ${why}.`,
        { file, tensor: name },
      );
    }
    const [rows, cols] = t.shape;
    out[map.hf] = map.conv1d
      ? { shape: [cols, rows], data: transpose(t.data, rows, cols) }
      : { shape: [...t.shape], data: t.data };
  }
  return out;
}

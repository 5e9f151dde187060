"""An independent GPT-2 for ringtrain's tests: files in Hugging Face's GPT-2 layout,
a float64 numpy forward, and a float64 PyTorch training run. Run with /usr/bin/python3
(Debian's numpy and torch); nothing here imports ringtrain or reads its code.

  make OUT --vocab V --layers L --width D --positions P --dtype F32|F16|BF16 --seed S [--hf-extras [--untie]]
      random GPT-2 weights (N(0, 0.2²) weights and biases, LayerNorm near 1) in the HF layout;
      --hf-extras writes it as GPT2LMHeadModel does: a `transformer.` prefix, the attention
      mask buffers and a tied lm_head.weight (--untie: one that differs from wte).
  logits FILE ROWS.json --heads H
      prints {"logits": [[...]]}: each row's last-position logits, numpy in float64.
  train FILE BATCHES.json --heads H --lr X --weight-decay W
      prints {"losses": [...]}: PyTorch AdamW steps in float64 from FILE's weights over the
      batches ({"inputs": [[[ids]]], "targets": [[[ids]]]}), one loss per step.
"""
import argparse
import json
import math
import re
import struct
import sys

import numpy as np

BLOCK = ['ln_1.weight', 'ln_1.bias', 'attn.c_attn.weight', 'attn.c_attn.bias', 'attn.c_proj.weight', 'attn.c_proj.bias',
         'ln_2.weight', 'ln_2.bias', 'mlp.c_fc.weight', 'mlp.c_fc.bias', 'mlp.c_proj.weight', 'mlp.c_proj.bias']


def shapes(vocab, layers, d, positions):
    out = [('wte.weight', (vocab, d)), ('wpe.weight', (positions, d))]
    per = {'ln_1.weight': (d,), 'ln_1.bias': (d,), 'attn.c_attn.weight': (d, 3 * d), 'attn.c_attn.bias': (3 * d,),
           'attn.c_proj.weight': (d, d), 'attn.c_proj.bias': (d,), 'ln_2.weight': (d,), 'ln_2.bias': (d,),
           'mlp.c_fc.weight': (d, 4 * d), 'mlp.c_fc.bias': (4 * d,), 'mlp.c_proj.weight': (4 * d, d), 'mlp.c_proj.bias': (d,)}
    for n in range(layers):
        out += [(f'h.{n}.{k}', per[k]) for k in BLOCK]
    return out + [('ln_f.weight', (d,)), ('ln_f.bias', (d,))]


def encode(values, dtype):
    """Little-endian bytes of float64 values in F32, F16 or BF16 (BF16: f32 rounded to nearest even, top 16 bits)."""
    if dtype == 'F32':
        return values.astype('<f4').tobytes()
    if dtype == 'F16':
        return values.astype('<f2').tobytes()
    bits = values.astype('<f4').view('<u4').astype(np.uint64)
    rounded = (bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    return rounded.astype('<u2').tobytes()


def write_safetensors(path, tensors, dtypes):
    header, blobs, offset = {'__metadata__': {'format': 'pt'}}, [], 0
    for name, values in tensors:
        blob = encode(values, dtypes[name])
        header[name] = {'dtype': dtypes[name], 'shape': list(values.shape), 'data_offsets': [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b' ' * ((8 - len(text) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))


def read_safetensors(path):
    """{name: float64 array}; F32, F16 and BF16."""
    with open(path, 'rb') as f:
        raw = f.read()
    n = struct.unpack('<Q', raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == '__metadata__':
            continue
        b = data[e['data_offsets'][0]:e['data_offsets'][1]]
        if e['dtype'] == 'F32':
            v = np.frombuffer(b, '<f4')
        elif e['dtype'] == 'F16':
            v = np.frombuffer(b, '<f2')
        else:
            v = (np.frombuffer(b, '<u2').astype(np.uint32) << 16).view('<f4')
        out[name.removeprefix('transformer.')] = v.astype(np.float64).reshape(e['shape'])
    return out


def make(a):
    rng = np.random.default_rng(a.seed)
    tensors = []
    for name, shape in shapes(a.vocab, a.layers, a.width, a.positions):
        if name.endswith('ln_1.weight') or name.endswith('ln_2.weight') or name == 'ln_f.weight':
            values = 1 + 0.1 * rng.standard_normal(shape)
        else:
            values = 0.2 * rng.standard_normal(shape)
        tensors.append((name, values))
    dtypes = {name: a.dtype for name, _ in tensors}
    if a.hf_extras:
        wte = tensors[0][1]
        tensors = [('transformer.' + n, v) for n, v in tensors]
        for n in range(a.layers):
            mask = np.tril(np.ones((a.positions, a.positions))).reshape(1, 1, a.positions, a.positions)
            tensors += [(f'transformer.h.{n}.attn.bias', mask), (f'transformer.h.{n}.attn.masked_bias', np.array(-1e4))]
        tensors.append(('lm_head.weight', wte + 1 if a.untie else wte))
        dtypes = {name: a.dtype for name, _ in tensors}
    write_safetensors(a.out, tensors, dtypes)


def layer_norm(x, w, b):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def forward_numpy(p, ids, heads):
    """GPT-2's forward for one sequence, float64: [T] ids -> [T, V] logits."""
    t = len(ids)
    d = p['wte.weight'].shape[1]
    dh = d // heads
    x = p['wte.weight'][ids] + p['wpe.weight'][:t]
    layers = len({k.split('.')[1] for k in p if k.startswith('h.')})
    causal = np.tril(np.ones((t, t), dtype=bool))
    for n in range(layers):
        g = lambda k: p[f'h.{n}.{k}']
        qkv = layer_norm(x, g('ln_1.weight'), g('ln_1.bias')) @ g('attn.c_attn.weight') + g('attn.c_attn.bias')
        q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
        y = np.zeros((t, d))
        for h in range(heads):
            s = slice(h * dh, (h + 1) * dh)
            att = np.where(causal, q[:, s] @ k[:, s].T / math.sqrt(dh), -np.inf)
            att = np.exp(att - att.max(-1, keepdims=True))
            y[:, s] = (att / att.sum(-1, keepdims=True)) @ v[:, s]
        x = x + y @ g('attn.c_proj.weight') + g('attn.c_proj.bias')
        hidden = gelu_tanh(layer_norm(x, g('ln_2.weight'), g('ln_2.bias')) @ g('mlp.c_fc.weight') + g('mlp.c_fc.bias'))
        x = x + hidden @ g('mlp.c_proj.weight') + g('mlp.c_proj.bias')
    return layer_norm(x, p['ln_f.weight'], p['ln_f.bias']) @ p['wte.weight'].T


def logits(a):
    p = read_safetensors(a.file)
    with open(a.rows) as f:
        rows = json.load(f)
    print(json.dumps({'logits': [forward_numpy(p, np.array(r), a.heads)[-1].tolist() for r in rows]}))


def train(a):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    buffers = re.compile(r'^h\.\d+\.attn\.(bias|masked_bias)$|^lm_head\.weight$')
    p = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in read_safetensors(a.file).items() if not buffers.match(k)}
    d = p['wte.weight'].shape[1]
    dh = d // a.heads
    layers = len({k.split('.')[1] for k in p if k.startswith('h.')})

    def forward(ids):
        b, t = ids.shape
        x = p['wte.weight'][ids] + p['wpe.weight'][:t]
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        for n in range(layers):
            g = lambda k: p[f'h.{n}.{k}']
            qkv = F.layer_norm(x, (d,), g('ln_1.weight'), g('ln_1.bias'), 1e-5) @ g('attn.c_attn.weight') + g('attn.c_attn.bias')
            q, k, v = [z.view(b, t, a.heads, dh).transpose(1, 2) for z in qkv.split(d, 2)]
            att = (q @ k.transpose(-2, -1) / math.sqrt(dh)).masked_fill(~mask, float('-inf')).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            x = x + y @ g('attn.c_proj.weight') + g('attn.c_proj.bias')
            h = F.gelu(F.layer_norm(x, (d,), g('ln_2.weight'), g('ln_2.bias'), 1e-5) @ g('mlp.c_fc.weight') + g('mlp.c_fc.bias'), approximate='tanh')
            x = x + h @ g('mlp.c_proj.weight') + g('mlp.c_proj.bias')
        return F.layer_norm(x, (d,), p['ln_f.weight'], p['ln_f.bias'], 1e-5) @ p['wte.weight'].T

    with open(a.batches) as f:
        batches = json.load(f)
    opt = torch.optim.AdamW(list(p.values()), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=a.weight_decay)
    losses = []
    for inputs, targets in zip(batches['inputs'], batches['targets']):
        out = forward(torch.tensor(inputs))
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), torch.tensor(targets).reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # Every row of wpe after training: the rows past the window only decay (their gradient is zero).
    print(json.dumps({'losses': losses, 'wpe': p['wpe.weight'].detach().tolist(), 'torch': torch.__version__}))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest='cmd', required=True)
    m = sub.add_parser('make')
    m.add_argument('out')
    for k in ['vocab', 'layers', 'width', 'positions', 'seed']:
        m.add_argument('--' + k, type=int, required=True)
    m.add_argument('--dtype', choices=['F32', 'F16', 'BF16'], default='F32')
    m.add_argument('--hf-extras', action='store_true')
    m.add_argument('--untie', action='store_true', help='with --hf-extras: an lm_head.weight that is not wte (refused)')
    lg = sub.add_parser('logits')
    lg.add_argument('file')
    lg.add_argument('rows')
    lg.add_argument('--heads', type=int, required=True)
    tr = sub.add_parser('train')
    tr.add_argument('file')
    tr.add_argument('batches')
    tr.add_argument('--heads', type=int, required=True)
    tr.add_argument('--lr', type=float, required=True)
    tr.add_argument('--weight-decay', type=float, required=True)
    a = ap.parse_args()
    {'make': make, 'logits': logits, 'train': train}[a.cmd](a)


if __name__ == '__main__':
    sys.exit(main())

/**
 * conv2d kernels against the im2col alternative, at the CNN's shapes, on one
 * adapter in one run. For each pass it times our direct kernel and the GEMM
 * that an im2col implementation would run on the same problem (A1's
 * planMatmul, which picks its own best variant). The GEMM alone is a lower
 * bound for im2col: building the column matrix (kh*kw copies of the
 * activations) would come on top. Prints one JSON line.
 *
 *   deno run -A bench/conv.ts [--batch 32] [--rounds 4]
 *   npx tsx bench/conv.ts
 *
 * Figures are the best of --rounds, the two sides alternating, so a burst of
 * load from other processes hurts neither side alone.
 */
import { detectRuntime } from '../src/core/runtime.ts';
import { acquireGpu } from '../src/gpu/device.ts';
import type { Dispatch } from '../src/gpu/gpu.ts';
import {
  type ConvShape,
  convOutSize,
  convSizes,
  planConv2dBackwardInput,
  planConv2dBackwardWeight,
  planConv2dForward,
} from '../src/nn/ops/conv2d/kernel.ts';
import { planMatmul } from '../src/gpu/kernels/matmul.ts';
import { args, opt } from './args.ts';

const batch = Number(opt('batch', '32'));
const rounds = Number(opt('rounds', '4'));
const gpu = await acquireGpu();

async function best(d: Dispatch, reps = 2): Promise<number> {
  gpu.record(d);
  await gpu.sync();
  const t0 = performance.now();
  for (let r = 0; r < reps; r++) gpu.record(d);
  await gpu.sync();
  return (performance.now() - t0) / reps;
}

const layers: Record<string, ConvShape> = {
  conv1: { n: batch, cin: 1, h: 28, w: 28, cout: 8, kh: 5, kw: 5, pad: 2 },
  conv2: { n: batch, cin: 8, h: 14, w: 14, cout: 16, kh: 5, kw: 5, pad: 2 },
};
const results = [];
for (const [name, s] of Object.entries(layers)) {
  const sz = convSizes(s);
  const { oh, ow } = convOutSize(s);
  const taps = s.kh * s.kw;
  const buf = (n: number) => gpu.storage(n);
  const [x, w, b, y, dy, dx, dw, db] = [sz.x, sz.weight, sz.bias, sz.y, sz.y, sz.x, sz.weight, sz.bias].map(buf);
  const pixels = s.n * oh * ow;
  // The GEMMs of im2col: forward [pixels x cin*taps]·[cin*taps x cout];
  // input grad [n*h*w x cout*taps]·[cout*taps x cin]; weight grad [cout x pixels]·[pixels x cin*taps].
  const colF = buf(pixels * s.cin * taps);
  const colB = buf(s.n * s.h * s.w * s.cout * taps);
  const passes: [string, Dispatch, Dispatch, number][] = [
    [
      'forward',
      planConv2dForward(gpu, s, x, w, b, y),
      planMatmul(gpu, colF, w, y, { m: pixels, n: s.cout, k: s.cin * taps, transB: true }),
      2 * pixels * s.cout * s.cin * taps,
    ],
    [
      'backward_input',
      planConv2dBackwardInput(gpu, s, dy, w, dx),
      planMatmul(gpu, colB, w, dx, { m: s.n * s.h * s.w, n: s.cin, k: s.cout * taps }),
      2 * s.n * s.h * s.w * s.cin * s.cout * taps,
    ],
    [
      'backward_weight',
      planConv2dBackwardWeight(gpu, s, dy, x, dw, db),
      planMatmul(gpu, dy, colF, dw, { m: s.cout, n: s.cin * taps, k: pixels, transA: true }),
      2 * pixels * s.cout * s.cin * taps,
    ],
  ];
  for (const [pass, direct, gemm, flops] of passes) {
    let ours = Infinity;
    let im2col = Infinity;
    for (let r = 0; r < rounds; r++) {
      ours = Math.min(ours, await best(direct));
      im2col = Math.min(im2col, await best(gemm));
    }
    results.push({
      layer: name,
      pass,
      ours_ms: +ours.toFixed(2),
      im2col_gemm_ms: +im2col.toFixed(2),
      ours_gflops: +(flops / ours / 1e6).toFixed(3),
      im2col_gemm_gflops: +(flops / im2col / 1e6).toFixed(3),
    });
  }
}
console.log(JSON.stringify({ runtime: detectRuntime(), adapter: gpu.info.description, batch, conv: results }));
gpu.destroy();

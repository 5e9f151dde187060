/**
 * What the per-tensor CRC-32 costs: encoding and decoding a checkpoint of
 * `--floats` parameters (plus as much optimizer state) with checksums and
 * without, in the same run, as medians of `--repeats` rounds. Prints one JSON
 * line; the ratios are what to compare across machines.
 *
 *   npx tsx bench/checkpoint-checksums.ts --floats 101770 --repeats 15
 */
import { checkpointFromFlat, decodeCheckpoint, encodeCheckpoint } from '../src/checkpoint/checkpoint.ts';
import { crc32 } from '../src/checkpoint/crc32.ts';
import { decodeSafetensors, encodeSafetensors } from '../src/checkpoint/safetensors.ts';
import { opt } from './args.ts';

const floats = Number(opt('floats', '101770'));
const repeats = Number(opt('repeats', '15'));
const params = Float32Array.from({ length: floats }, (_, i) => Math.sin(i));
const layout = [{ name: 'w', shape: [floats], offset: 0, length: floats }];
const c = checkpointFromFlat({
  model: 'mlp',
  optimizer: 'sgd',
  step: 1,
  layout,
  params,
  optimizerState: { momentum: params.slice() },
});

function median(fn: () => void): number {
  const times: number[] = [];
  for (let i = 0; i < repeats; i++) {
    const t0 = performance.now();
    fn();
    times.push(performance.now() - t0);
  }
  return times.sort((a, b) => a - b)[Math.floor(times.length / 2)];
}

const withSums = encodeCheckpoint(c);
const parsed = decodeSafetensors(withSums);
const encodePlain = () => encodeSafetensors(parsed.tensors, parsed.metadata, { checksums: false });
const plain = encodePlain();
const ms = {
  encode_with: median(() => encodeCheckpoint(c)),
  encode_without: median(encodePlain),
  decode_with: median(() => decodeCheckpoint(withSums)),
  decode_without: median(() => decodeCheckpoint(plain)),
  crc32_only: median(() => crc32(withSums)),
};
console.log(
  JSON.stringify({
    bench: 'checkpoint-checksums',
    floats,
    bytes: withSums.length,
    repeats,
    ms: Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, Number(v.toFixed(3))])),
    crc32_mb_per_s: Number((withSums.length / 1e6 / (ms.crc32_only / 1000)).toFixed(1)),
    encode_ratio: Number((ms.encode_with / ms.encode_without).toFixed(3)),
    decode_ratio: Number((ms.decode_with / ms.decode_without).toFixed(3)),
  }),
);

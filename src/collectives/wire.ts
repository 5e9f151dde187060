import { float16ToFloat32, float32ToFloat16 } from './fp16.ts';
import type { Compression, Tensor } from './types.ts';

/**
 * How a slice of a tensor looks on the wire. Raw codecs send the bytes as they
 * are (little endian, as every WebGPU platform is); the fp16 codec halves
 * float32 traffic.
 */
export interface Codec {
  readonly bytesPerElement: number;
  /** Whether decode(encode(x)) may differ from x. */
  readonly lossy: boolean;
  /** Bytes to send for `src`; may be a view of it (the communicator copies). */
  encode(src: Tensor): Uint8Array;
  /**
   * The received elements as a tensor of the collective's dtype: a view of the
   * payload where the bytes allow it, else written into `into` when given
   * (sized to match), else a new array.
   */
  decode(payload: Uint8Array, like: Tensor, into?: Tensor): Tensor;
}

function aligned(p: Uint8Array, bytes: number): Uint8Array {
  // Typed-array views need an aligned offset; data channels usually deliver one, copy otherwise.
  return p.byteOffset % bytes === 0 ? p : p.slice();
}

type TensorView = new (buffer: ArrayBufferLike, byteOffset: number, length: number) => Tensor;

function rawCodec(bytesPerElement: number): Codec {
  return {
    bytesPerElement,
    lossy: false,
    encode: (src) => new Uint8Array(src.buffer, src.byteOffset, src.byteLength),
    decode(payload, like) {
      const p = aligned(payload, bytesPerElement);
      return new (like.constructor as TensorView)(p.buffer, p.byteOffset, p.byteLength / bytesPerElement);
    },
  };
}

const RAW = new Map([1, 2, 4].map((n) => [n, rawCodec(n)]));

const fp16: Codec = {
  bytesPerElement: 2,
  lossy: true,
  encode: (src) => {
    const h = float32ToFloat16(src as Float32Array);
    return new Uint8Array(h.buffer, h.byteOffset, h.byteLength);
  },
  decode(payload, _like, into) {
    const p = aligned(payload, 2);
    return float16ToFloat32(new Uint16Array(p.buffer, p.byteOffset, p.byteLength / 2), into as Float32Array | undefined);
  },
};

/** The codec for tensors like `like` (fp16 compression applies to float32 only; callers check). */
export function codecFor(compression: Compression, like: Tensor): Codec {
  return compression === 'fp16' && like instanceof Float32Array ? fp16 : RAW.get(like.BYTES_PER_ELEMENT)!;
}

/** Rounds `t` through the wire format in place, so the owner of a chunk keeps exactly what the others receive. */
export function roundTripInPlace(codec: Codec, t: Tensor): void {
  if (!codec.lossy || t.length === 0) return;
  t.set(codec.decode(codec.encode(t), t));
}

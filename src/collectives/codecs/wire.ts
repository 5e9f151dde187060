import { float16ToFloat32, float32ToFloat16 } from './fp16.ts';
import { dequantizeInt8, encodeWithFeedback, INT8_HEADER_BYTES, quantizeInt8 } from './int8.ts';
import type { Compression, Tensor } from './types.ts';

/**
 * How a slice of a tensor looks on the wire. Raw codecs send the bytes as they
 * are (little endian, as every WebGPU platform is); the fp16 codec halves
 * float32 traffic, the int8 codec quarters it (plus a scale per segment).
 */
export interface Codec {
  readonly bytesPerElement: number;
  /** Bytes in front of the elements of every payload (int8: the segment's scale). */
  readonly headerBytes: number;
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
  // Typed-array views need an aligned offset; data channels usually deliver one, copy otherwise (not with
  // p.slice(): a Node Buffer's slice is a view at the same offset).
  return p.byteOffset % bytes === 0 ? p : new Uint8Array(p);
}

type TensorView = new (buffer: ArrayBufferLike, byteOffset: number, length: number) => Tensor;

function rawCodec(bytesPerElement: number): Codec {
  return {
    bytesPerElement,
    headerBytes: 0,
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
  headerBytes: 0,
  lossy: true,
  encode: (src) => {
    const h = float32ToFloat16(src as Float32Array);
    return new Uint8Array(h.buffer, h.byteOffset, h.byteLength);
  },
  decode(payload, _like, into) {
    const p = aligned(payload, 2);
    return float16ToFloat32(
      new Uint16Array(p.buffer, p.byteOffset, p.byteLength / 2),
      into as Float32Array | undefined,
    );
  },
};

const int8: Codec = {
  bytesPerElement: 1,
  headerBytes: INT8_HEADER_BYTES,
  lossy: true,
  encode: (src) => quantizeInt8(src as Float32Array),
  decode: (payload, _like, into) => dequantizeInt8(payload, into as Float32Array | undefined),
};

/** The codec for tensors like `like` (fp16 and int8 compression apply to float32 only; callers check). */
export function codecFor(compression: Compression, like: Tensor): Codec {
  if (!(like instanceof Float32Array)) return RAW.get(like.BYTES_PER_ELEMENT)!;
  return compression === 'fp16' ? fp16 : compression === 'int8' ? int8 : RAW.get(4)!;
}

/** Elements a payload of this codec carries. */
export function elementsIn(codec: Codec, payload: Uint8Array): number {
  return (payload.byteLength - codec.headerBytes) / codec.bytesPerElement;
}

/**
 * Encodes `view` for sending. With a `residual` (error feedback, lossy codecs on
 * float32) what earlier sends cut off rides along, and `view` becomes what the
 * receivers will decode; without one it is plain `codec.encode`.
 */
export function encodeSegment(codec: Codec, view: Tensor, residual?: Float32Array): Uint8Array {
  if (!residual || !codec.lossy) return codec.encode(view);
  return encodeWithFeedback(
    view as Float32Array,
    residual,
    (v) => codec.encode(v),
    (p, into) => void codec.decode(p, into, into),
  );
}

/** Rounds `t` through the wire format in place, so the owner of a chunk keeps exactly what the others receive. */
export function roundTripInPlace(codec: Codec, t: Tensor): void {
  if (!codec.lossy || t.length === 0) return;
  t.set(codec.decode(codec.encode(t), t));
}

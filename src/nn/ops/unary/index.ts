/**
 * exp and rsqrt: pointwise primitives, so that ops such as RMSNorm or a GELU
 * variant are written in functional forms with no WGSL of their own. rsqrt
 * takes ε (1/√(x + ε)) because every norm adds one before the root, and an
 * op for the addition alone would cost a dispatch and a buffer.
 */
import { ErrorCode, RingtrainError } from '../../../core/errors.ts';
import { defineOp, type Op, requireF32 } from '../../op.ts';
import { apply, sizeOf, type Tensor } from '../../tensor.ts';
import { planUnaryBackward, planUnaryForward, type UnaryKind } from './kernel.ts';
import { expRef, rsqrtRef } from './reference.ts';

export interface RsqrtAttrs {
  [key: string]: unknown;
  /** Added before the root (default 0). */
  eps?: number;
}

function unaryOp(
  kind: UnaryKind,
  f: (x: number, eps: number) => number,
  dfFromY: (y: number) => number,
): Op<RsqrtAttrs> {
  return defineOp<RsqrtAttrs>({
    name: kind,
    shape([x], attrs, info) {
      requireF32(info, kind, [x]);
      if (attrs.eps !== undefined && (kind !== 'rsqrt' || !(Number.isFinite(attrs.eps) && attrs.eps >= 0))) {
        throw new RingtrainError(
          ErrorCode.InvalidArgument,
          `layer ${info.path} (${kind}): ${kind === 'rsqrt' ? `eps must be a finite number ≥ 0, got ${attrs.eps}` : 'takes no eps; add a constant before it instead'}`,
          { layer: info.path, eps: attrs.eps },
        );
      }
      return { shape: x };
    },
    plan(ctx, attrs) {
      const n = sizeOf(ctx.inputShapes[0]);
      const forward = [planUnaryForward(ctx.gpu, kind, ctx.input(0), ctx.output(), n, attrs.eps ?? 0)];
      const [dy, dx] = [ctx.gradOut(), ctx.gradIn(0)];
      return { forward, backward: dy && dx ? [planUnaryBackward(ctx.gpu, kind, ctx.output(), dy, dx, n)] : [] };
    },
    cpu: {
      forward: ([x], _s, attrs) => x.map((v) => f(v, attrs.eps ?? 0)),
      backward: (_x, _s, _a, y, dy) => [dy.map((g, i) => g * dfFromY(y[i]))],
    },
  });
}

export const expOp = unaryOp('exp', (x) => expRef.f(x), expRef.dfFromY);
export const rsqrtOp = unaryOp('rsqrt', rsqrtRef.f, rsqrtRef.dfFromY);

// The functional forms, for `forward` methods (nn.F).
/** eˣ, elementwise. */
export const exp = (x: Tensor): Tensor => apply(expOp, [x], {});
/** 1/√(x + eps), elementwise. */
export const rsqrt = (x: Tensor, eps?: number): Tensor => apply(rsqrtOp, [x], eps === undefined ? {} : { eps });

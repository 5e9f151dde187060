/**
 * Shapes and element types, apart from the tensors that carry them: ops
 * (op.ts) describe their shapes with these, and tensors (tensor.ts) apply
 * ops, so neither file imports the other for them.
 */
export type Shape = readonly number[];
/** Element types: f32 for values, u32 for indices (labels, token ids, argmax). */
export type DType = 'f32' | 'u32';

export function sizeOf(shape: Shape): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function shapeText(shape: Shape): string {
  return `[${shape.join(', ')}]`;
}

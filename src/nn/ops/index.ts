/**
 * Every op folder, one line each: the only place an op is named outside its
 * folder. Node and Deno cannot glob imports, so this list is written by hand;
 * test/nn/coverage.test.ts fails when a folder under src/nn/ops/ is missing.
 * Importing this module registers every op and its kernels, and gives the
 * model API its functional forms (nn.F) and layers (derived in
 * src/nn/functional.ts and src/nn/index.ts from what the folders export).
 */
export * from './activation/index.ts';
export * from './add/index.ts';
export * from './attention/index.ts';
export * from './bmm/index.ts';
export * from './broadcast/index.ts';
export * from './conv2d/index.ts';
export * from './cross-entropy/index.ts';
export * from './dropout/index.ts';
export * from './embedding/index.ts';
export * from './gelu/index.ts';
export * from './layernorm/index.ts';
export * from './linear/index.ts';
export * from './matmul/index.ts';
export * from './maxpool/index.ts';
export * from './mse/index.ts';
export * from './permute/index.ts';
export * from './reshape/index.ts';
export * from './rmsnorm/index.ts';
export * from './row-reduce/index.ts';
export * from './softmax/index.ts';
export * from './unary/index.ts';

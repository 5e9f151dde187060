/** Seeded randomness lives in src/nn/random.ts (the model API draws initial weights from it); re-exported for the engine's users. */
export { initTensor, seededNormal, seededUniform, type InitKind } from '../nn/random.ts';

/**
 * The embedding's backward pass walks at most `EMBEDDING_TILE` sorted rows, and at most twice the
 * tiles, in one shader invocation; a step with more ids than that bound allows under lavapipe's
 * 65,535-iteration loop cap is refused, naming the most ids that fit, not run to a wrong gradient.
 */
import { describe, expect, it } from 'vitest';
import { checkEmbeddingTiles, EMBEDDING_TILE } from '../../src/nn/ops/embedding/kernel.ts';

const most = Math.floor((65_535 - EMBEDDING_TILE) / 2) * EMBEDDING_TILE;

describe('embedding backward under the loop cap', () => {
  it("plans GPT-2's batch 8 × context 1024 and the largest step that fits, in tiles of EMBEDDING_TILE rows", () => {
    expect(checkEmbeddingTiles({ rows: 8 * 1024, vocab: 50_257, dim: 768 })).toBe((8 * 1024) / EMBEDDING_TILE);
    expect(checkEmbeddingTiles({ rows: most, vocab: 50_257, dim: 768 })).toBe(most / EMBEDDING_TILE);
    expect(checkEmbeddingTiles({ rows: 1, vocab: 3, dim: 2 })).toBe(1);
  });

  it('refuses one tile more, naming the most ids a step may hold', () => {
    expect(() => checkEmbeddingTiles({ rows: most + 1, vocab: 50_257, dim: 768 })).toThrow(
      new RegExp(`at most ${most} ids per step`),
    );
  });
});

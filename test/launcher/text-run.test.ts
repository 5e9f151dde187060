/**
 * `ringtrain run -np 2 --text FILE` over real WebRTC: both workers read the
 * launcher's file, check its SHA-256 against the job's, build the same
 * vocabulary, and train the sized transformer together. A worker whose copy
 * of the text differs is refused naming both hashes.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeSafetensors } from '../../src/checkpoint/safetensors.ts';
import { checkWorkerModelOptions, workerText } from '../../src/cli/options/text-option.node.ts';
import { crc32 } from '../../src/checkpoint/crc32.ts';
import { jobSpecFor, type RunOptions } from '../../src/cli/options/run-options.node.ts';
import { parseJobSettings } from '../../src/job/settings.ts';
import { ringtrain } from '../support/cli.ts';

/** The worker's check, given the job's settings parsed as a worker's session parses them. */
const textOf = (
  job: { id: string; config: { model: string; hyperparameters: Record<string, unknown> } },
  given?: string,
) => workerText(job, parseJobSettings(job.config.hyperparameters).data, given);

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-text-run-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const TEXT =
  Array.from(
    { length: 300 },
    (_, i) => ['Ring', 'all', 'reduce', 'over', 'WebRTC;', 'peers', 'agree.'][(i * 5) % 7],
  ).join(' ') + '\n';
const sha = (s: string) => createHash('sha256').update(s).digest('hex');

describe('run -np 2 --text', () => {
  it("a worker must bring the job's text (same SHA-256) and its model options", () => {
    const mine = join(dir, 'mine.txt');
    const other = join(dir, 'other.txt');
    writeFileSync(mine, TEXT);
    writeFileSync(other, TEXT.replace('agree', 'Agree'));
    const job = {
      id: 'run-x',
      config: { model: 'transformer', hyperparameters: { text: 'mine.txt', textSha256: sha(TEXT), context: 16 } },
    };
    expect(textOf(job, mine)).toEqual({ path: mine, context: 16 });
    // The job's tokenizer is every rank's: `run` writes it into the job (only when named), and a worker tokenizes its
    // copy with it.
    const o = {
      np: 2,
      extraPeers: 0,
      model: 'transformer',
      optimizer: 'adamw',
      batch: 4,
      fp16: false,
      settings: { elastic: false },
      text: mine,
      textSha256: sha(TEXT),
    } as unknown as RunOptions;
    expect(parseJobSettings(jobSpecFor({ ...o, tokenizer: 'gpt2' }).config.hyperparameters).data).toMatchObject({
      text: 'mine.txt',
      tokenizer: 'gpt2',
    });
    expect(parseJobSettings(jobSpecFor(o).config.hyperparameters).data.tokenizer).toBeUndefined();
    expect(
      textOf(
        { ...job, config: { ...job.config, hyperparameters: { ...job.config.hyperparameters, tokenizer: 'gpt2' } } },
        mine,
      ),
    ).toEqual({ path: mine, context: 16, tokenizer: 'gpt2' });
    expect(() => textOf(job, other)).toThrow(
      `this peer's --text ${other} has SHA-256 ${sha(TEXT.replace('agree', 'Agree'))}, but job "run-x" trains on "mine.txt" with SHA-256 ${sha(TEXT)}`,
    );
    expect(() => textOf(job, undefined)).toThrow(
      `job "run-x" trains on the text "mine.txt" (SHA-256 ${sha(TEXT)}); pass your copy of it`,
    );
    expect(() => textOf({ id: 'run-y', config: { model: 'mlp', hyperparameters: {} } }, mine)).toThrow(
      'not on a text; drop --text',
    );
    expect(() => checkWorkerModelOptions('run-x', { width: 32 }, { width: 16, layers: 1 })).toThrow(
      `this peer's --model-options {"width":32} differ from job "run-x"'s {"width":16,"layers":1}`,
    );
    expect(() => checkWorkerModelOptions('run-x', { layers: 1, width: 16 }, { width: 16, layers: 1 })).not.toThrow();
  });

  it('trains over real WebRTC, every rank with the same vocabulary, and the checkpoint records it and the sizes', async () => {
    const text = join(dir, 'ring.txt');
    writeFileSync(text, TEXT);
    const ckpt = join(dir, 'ring.safetensors');
    const r = await ringtrain([
      'run',
      '-np',
      '2',
      '--text',
      text,
      '--context',
      '16',
      '--layers',
      '1',
      '--width',
      '16',
      '--heads',
      '2',
      '--batch',
      '4',
      '--steps',
      '6',
      '--eval-limit',
      '8',
      '--runtime',
      'deno',
      '--save',
      ckpt,
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(summary).toMatchObject({ ok: true, steps: 6, size: 2, model: 'transformer', text_sha256: sha(TEXT) });
    const { metadata } = decodeSafetensors(readFileSync(ckpt));
    const vocab = [...new Set(TEXT)].sort();
    expect(JSON.parse(metadata.model_spec)).toMatchObject({
      context: 16,
      layers: 1,
      width: 16,
      heads: 2,
      vocab: vocab.length,
    });
    const expected = crc32(new TextEncoder().encode(metadata.vocabulary));
    expect(summary.vocabulary_by_rank).toEqual([
      { rank: 0, size: vocab.length, crc32: expected },
      { rank: 1, size: vocab.length, crc32: expected },
    ]);
  }, 120_000);
});

/**
 * Jobs in the page beyond the digits: a Chromium tab and a Deno worker train
 * together over real WebRTC, the words transformer (the built-in recipe), a
 * small transformer on a user's text file (its own characters, then GPT-2's
 * tokenizer) and the mlp on a user's CSV table. With a user's file the worker
 * reads its own copy; the tab downloads the job's file from the server that
 * serves the page (only with the job's token, only a file the job names, and
 * checked against the job's SHA-256). A transformer's tab shows validation loss
 * and perplexity where a classifier shows accuracy, and samples from the weights
 * it holds: words, or a continuation of a prompt. One server and one Chromium
 * for all of them.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startDenoWorker } from '../support/workers.ts';
import { joinAndTrain, screenshot, usePageFixture } from './serve-page.ts';

const STEPS = 3;
const dir = mkdtempSync(join(tmpdir(), 'ringtrain-text-job-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// A short text of few characters (a small vocabulary, a small model): a user's own file.
const TEXT = 'the cat sat on the mat. the dog ate the hat. a cat and a dog sat on a mat.\n'.repeat(40);
const BYTES = new TextEncoder().encode(TEXT);
const SHA = createHash('sha256').update(BYTES).digest('hex');
const FILE = join(dir, 'tale.txt');
writeFileSync(FILE, BYTES);

// What `ringtrain run --text tale.txt --context 16 --layers 1 --width 32 --heads 2` writes, a few steps and a small
// validation glance.
const JOB = {
  id: 'tale',
  token: 'tok-tale',
  config: {
    model: 'transformer',
    optimizer: 'adamw',
    hyperparameters: {
      lr: 0.003,
      weightDecay: 0.01,
      steps: STEPS,
      seed: 2,
      sampling: 'replacement',
      warmupFrom: 'zero',
      warmupSteps: 100,
      evalLimit: 8,
      text: 'tale.txt',
      textSha256: SHA,
      context: 16,
      modelOptions: '{"layers":1,"width":32,"heads":2}',
    },
    batchPerPeer: 4,
    minPeers: 2,
    maxPeers: 2,
  },
};
// The same text with GPT-2's tokenizer (`run --text tale.txt --tokenizer gpt2 …`): the tab loads the tokenizer and
// tokenizes its download with it. One step: with GPT-2's 50,257 outputs a step takes seconds on the software adapters,
// and one allreduced step is all this job's claims need (the tokenizer, the ring, sampling from the tab's weights).
const GPT2_STEPS = 1;
const GPT2_JOB = {
  ...JOB,
  id: 'tale-gpt2',
  token: 'tok-tale-gpt2',
  config: {
    ...JOB.config,
    hyperparameters: { ...JOB.config.hyperparameters, steps: GPT2_STEPS, tokenizer: 'gpt2' },
  },
};
// The words recipe's settings as `ringtrain run --model transformer` writes them, a few steps and a small validation
// glance.
const WORDS_JOB = {
  id: 'words',
  token: 'tok-words',
  config: {
    model: 'transformer',
    optimizer: 'adamw',
    hyperparameters: {
      lr: 0.003,
      weightDecay: 0.01,
      steps: STEPS,
      seed: 2,
      sampling: 'replacement',
      warmupFrom: 'zero',
      warmupSteps: 100,
      evalLimit: 16,
    },
    batchPerPeer: 4,
    minPeers: 2,
    maxPeers: 2,
  },
};
const OTHER = new TextEncoder().encode('another job’s text');

// Three classes by the quadrant of two features, 150 rows (every fifth is a test row): `run --data rows.csv
// --label-column label`.
const CSV = `x,y,label\n${Array.from({ length: 150 }, (_, i) => {
  const x = Math.sin(i * 1.7) * 2;
  const y = Math.cos(i * 2.3) * 2;
  return `${x.toFixed(3)},${y.toFixed(3)},${x < 0 ? 0 : y < 0 ? 1 : 2}`;
}).join('\n')}\n`;
const CSV_FILE = join(dir, 'rows.csv');
writeFileSync(CSV_FILE, CSV);
const TABLE_STEPS = 30;
const TABLE_JOB = {
  id: 'rows',
  token: 'tok-rows',
  config: {
    model: 'mlp',
    optimizer: 'adamw',
    hyperparameters: {
      lr: 0.02,
      weightDecay: 0.0001,
      steps: TABLE_STEPS,
      seed: 3,
      table: 'rows.csv',
      tableSha256: createHash('sha256').update(CSV).digest('hex'),
      labelColumn: 'label',
    },
    batchPerPeer: 8,
    minPeers: 2,
    maxPeers: 2,
  },
};
// A minute of missed heartbeats, as `run` allows its local workers: a worker warms up a model with
// GPT-2's 50,257 outputs between the server's welcome and the ring, which on a busy CPU adapter
// keeps Deno's event loop longer than the default 15 s.
const fx = usePageFixture({
  jobs: [WORDS_JOB, JOB, GPT2_JOB, TABLE_JOB],
  files: [BYTES, OTHER, new TextEncoder().encode(CSV)],
  missedHeartbeats: 12,
});

describe('a text job in the page', () => {
  it('serves the job’s text to its peers only, and only the files the job names', async () => {
    const url = `${fx.server.url}/api/jobs/${JOB.id}/files/${SHA}`;
    const ok = await fetch(url, { headers: { authorization: `Bearer ${JOB.token}` } });
    expect(ok.status).toBe(200);
    expect(new Uint8Array(await ok.arrayBuffer())).toEqual(BYTES);
    // Without the token the job is not there at all (ids are not to be probed); a public job's files answer 403.
    const anonymous = await fetch(url);
    expect(anonymous.status).toBe(404);
    expect(((await anonymous.json()) as { error: string }).error).toContain('needs its token');
    const otherSha = createHash('sha256').update(OTHER).digest('hex');
    const other = await fetch(`${fx.server.url}/api/jobs/${JOB.id}/files/${otherSha}`, {
      headers: { authorization: `Bearer ${JOB.token}` },
    });
    expect(other.status).toBe(404);
    expect(((await other.json()) as { error: string }).error).toContain(`names no file with SHA-256 ${otherSha}`);
  });

  it(
    'trains with a Deno worker that reads its own copy, and continues a prompt from the tab’s weights',
    { timeout: 600_000 },
    async () => {
      const worker = startDenoWorker(fx.server.url, JOB, ['--text', FILE]);
      try {
        const { page, errors, note } = await joinAndTrain(
          fx.browser,
          `${fx.server.url}/?job=${JOB.id}#token=${JOB.token}`,
        );
        expect(note, worker.stderr).toMatch(
          new RegExp(`Training finished: ${STEPS} steps, validation loss \\d+\\.\\d+`),
        );
        // The continuation: the prompt is the start of the validation text, the rest is sampled, in the text's
        // characters.
        await page.waitForSelector('[data-testid=text-panel][data-state=attached]', { timeout: 60_000 });
        const prompt = await page.inputValue('[data-testid=text-prompt]');
        expect(TEXT).toContain(prompt);
        expect(prompt.length).toBe(16);
        await page.click('[data-testid=text-generate]');
        await page.waitForSelector('[data-testid=text-panel][data-state=generated]', { timeout: 60_000 });
        const continuation = (await page.textContent('[data-testid=text-continuation]')) ?? '';
        expect([...continuation]).toHaveLength(200);
        const alphabet = new Set(TEXT);
        expect([...continuation].filter((c) => !alphabet.has(c))).toEqual([]);
        // A character the text never had is refused, naming it.
        await page.fill('[data-testid=text-prompt]', 'the cat Z');
        await page.click('[data-testid=text-generate]');
        await page.waitForSelector('[data-testid=text-panel][data-state=failed]', { timeout: 60_000 });
        expect(await page.textContent('[data-testid=text-status]')).toContain(
          '"Z" (U+005A) is not in the model\'s vocabulary',
        );
        await screenshot(page, 'text-job');
        expect(errors).toEqual([]);
        expect(await worker.exit, worker.stderr).toBe(0);
        expect(worker.result).toMatchObject({ steps: STEPS, size: 2 });
        await page.close();
      } finally {
        worker.child.kill('SIGKILL');
      }
    },
  );

  it(
    "a gpt2 job: the tab tokenizes with GPT-2's BPE, trains with a Deno worker, and continues a prompt in GPT-2 tokens",
    { timeout: 600_000 },
    async () => {
      const worker = startDenoWorker(fx.server.url, GPT2_JOB, ['--text', FILE]);
      try {
        const { page, errors, note } = await joinAndTrain(
          fx.browser,
          `${fx.server.url}/?job=${GPT2_JOB.id}#token=${GPT2_JOB.token}`,
        );
        expect(note, worker.stderr).toMatch(
          new RegExp(`Training finished: ${GPT2_STEPS} steps, validation loss \\d+\\.\\d+`),
        );
        await page.waitForSelector('[data-testid=text-panel][data-state=attached]', { timeout: 60_000 });
        // The first prompt is 16 GPT-2 tokens of the validation text, decoded: more than 16 characters of it.
        const prompt = await page.inputValue('[data-testid=text-prompt]');
        expect(TEXT).toContain(prompt);
        expect(prompt.length).toBeGreaterThan(16);
        // GPT-2 has a token for any text: a capital the text never had is no refusal here.
        await page.fill('[data-testid=text-prompt]', 'the cat Z');
        await page.click('[data-testid=text-generate]');
        await page.waitForSelector('[data-testid=text-panel][data-state=generated]', { timeout: 60_000 });
        const continuation = (await page.textContent('[data-testid=text-continuation]')) ?? '';
        expect(continuation.length).toBeGreaterThan(200); // 200 tokens of GPT-2's whole vocabulary: words and pieces of words
        expect(errors).toEqual([]);
        expect(await worker.exit, worker.stderr).toBe(0);
        expect(worker.result).toMatchObject({ steps: GPT2_STEPS, size: 2, vocabulary_size: 50257 });
        await page.close();
      } finally {
        worker.child.kill('SIGKILL');
      }
    },
  );

  it('trains the mlp on a table with a Deno worker that reads its own copy', { timeout: 600_000 }, async () => {
    const worker = startDenoWorker(fx.server.url, TABLE_JOB, ['--data', CSV_FILE]);
    try {
      const { page, errors, note } = await joinAndTrain(
        fx.browser,
        `${fx.server.url}/?job=${TABLE_JOB.id}#token=${TABLE_JOB.token}`,
      );
      const accuracy = Number(
        new RegExp(`Training finished: ${TABLE_STEPS} steps, test accuracy (\\d+\\.\\d)%`).exec(note)?.[1],
      );
      expect(accuracy, `${note} ${worker.stderr}`).toBeGreaterThan(60); // three classes: chance is 33%
      expect(errors).toEqual([]);
      expect(await worker.exit, worker.stderr).toBe(0);
      const summary = worker.result!;
      expect(summary).toMatchObject({ steps: TABLE_STEPS, size: 2, table_split: { train: 120, test: 30 } });
      // Both ranks evaluated the same weights on the same 30 test rows.
      expect((summary.test_accuracy * 100).toFixed(1)).toBe(accuracy.toFixed(1));
      await page.close();
    } finally {
      worker.child.kill('SIGKILL');
    }
  });
});

describe('a transformer job in the page', () => {
  it(
    'trains with a Deno worker, shows the validation loss and generates words from the tab’s weights',
    { timeout: 600_000 },
    async () => {
      const worker = startDenoWorker(fx.server.url, WORDS_JOB);
      try {
        const { page, errors, note } = await joinAndTrain(
          fx.browser,
          `${fx.server.url}/?job=${WORDS_JOB.id}#token=${WORDS_JOB.token}`,
        );
        expect(note, worker.stderr).toMatch(
          new RegExp(`Training finished: ${STEPS} steps, validation loss \\d+\\.\\d+ \\(perplexity \\d+\\.\\d+\\)`),
        );
        // The job panel shows the validation loss (the server's copy of the peers' progress), not an accuracy.
        expect(await page.textContent('[data-testid=metric-label]')).toBe('Validation loss');
        await page.waitForFunction(
          () => /perplexity/.test(document.querySelector('[data-testid=accuracy]')?.textContent ?? ''),
          undefined,
          { timeout: 30_000 },
        );
        const chart = page.locator('[data-testid=chart-accuracy]');
        await page.waitForSelector('[data-testid=chart-accuracy][data-metric=validation-loss][data-values]', {
          timeout: 30_000,
        });
        const values = JSON.parse((await chart.getAttribute('data-values')) ?? '[]') as number[];
        expect(values.at(-1)).toBeGreaterThan(0);
        expect(values.at(-1)).toBeLessThan(6); // nats per character, not a percentage
        // Generate: words spelled by the tab's copy of the job's weights.
        await page.waitForSelector('[data-testid=words-panel][data-state=attached]', { timeout: 60_000 });
        await page.click('[data-testid=generate]');
        await page.waitForSelector('[data-testid=words-panel][data-state=generated]', { timeout: 120_000 });
        const words = await page.locator('[data-testid=words] li').allTextContents();
        expect(words).toHaveLength(8);
        for (const w of words) expect(w).toMatch(/^[a-z]{1,31}$/);
        await screenshot(page, 'transformer-job');
        expect(errors).toEqual([]);
        expect(await worker.exit, worker.stderr).toBe(0);
        expect(worker.result).toMatchObject({ steps: STEPS, size: 2 });
        await page.close();
      } finally {
        worker.child.kill('SIGKILL');
      }
    },
  );
});

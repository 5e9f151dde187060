/**
 * `ringtrain run -np 2 --data FILE.csv --label-column NAME` over real WebRTC:
 * the job records the table's SHA-256 and label column, both workers read the
 * launcher's file, check its hash, make the same split (every fifth row held
 * out) and train the mlp together. A worker whose copy of the table (or of the
 * labels file) differs is refused naming both hashes.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { workerTable } from '../../src/cli/options/table-option.node.ts';
import { jobSpecFor } from '../../src/cli/options/run-options.node.ts';
import type { RunOptions } from '../../src/cli/options/run-options.node.ts';
import { parseJobSettings } from '../../src/job/settings.ts';
import { startServer } from '../../server/index.ts';
import { TOKEN_ENV } from '../../src/cli/options/secrets.node.ts';
import { ringtrain } from '../support/cli.ts';

/** The worker's check, given the job's settings parsed as a worker's session parses them. */
const tableOf = (
  job: { id: string; config: { model: string; hyperparameters: Record<string, unknown> } },
  given: Parameters<typeof workerTable>[2],
) => workerTable(job, parseJobSettings(job.config.hyperparameters).data, given);

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-table-run-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Three separable classes in four features: class c puts its mass on feature c. */
function csv(rows: number): string {
  const lines = ['f0,f1,f2,f3,label'];
  for (let i = 0; i < rows; i++) {
    const c = i % 3;
    lines.push([...Array.from({ length: 4 }, (_, j) => (j === c ? 1 : 0) + ((i * 7 + j * 3) % 10) / 50), c].join(','));
  }
  return lines.join('\n') + '\n';
}

const TABLE = csv(300);
const sha = (s: string) => createHash('sha256').update(s).digest('hex');

describe('run -np 2 --data TABLE', () => {
  it("the job records the table's hash and label column, and a worker must bring the same copies", () => {
    const mine = join(dir, 'mine.csv');
    const other = join(dir, 'other.csv');
    const labels = join(dir, 'labels.txt');
    const otherLabels = join(dir, 'other-labels.txt');
    writeFileSync(mine, TABLE);
    writeFileSync(other, TABLE.replace('\n1,', '\n2,'));
    const LABELS = Array.from({ length: 300 }, (_, i) => i % 3).join('\n') + '\n';
    writeFileSync(labels, LABELS);
    writeFileSync(otherLabels, LABELS.replace('2', '1'));

    const o = {
      np: 2,
      extraPeers: 0,
      model: 'mlp',
      optimizer: 'sgd',
      batch: 16,
      fp16: false,
      settings: { elastic: false },
      data: mine,
      labelColumn: 'label',
      tableSha256: sha(TABLE),
    } as unknown as RunOptions;
    const h = parseJobSettings(jobSpecFor(o).config.hyperparameters).data;
    expect(h).toMatchObject({ table: 'mine.csv', tableSha256: sha(TABLE), labelColumn: 'label' });
    expect(h.labels).toBeUndefined();

    const job = {
      id: 'run-x',
      config: { model: 'mlp', hyperparameters: { table: 'mine.csv', tableSha256: sha(TABLE), labelColumn: 'label' } },
    };
    expect(tableOf(job, { data: mine })).toEqual({ labelColumn: 'label' });
    expect(() => tableOf(job, { data: other })).toThrow(
      `this peer's --data ${other} has SHA-256 ${sha(TABLE.replace('\n1,', '\n2,'))}, but job "run-x" trains on "mine.csv" with SHA-256 ${sha(TABLE)}`,
    );
    expect(() => tableOf(job, {})).toThrow(
      `job "run-x" trains on the table "mine.csv" (SHA-256 ${sha(TABLE)}); pass your copy of it`,
    );
    expect(() => tableOf(job, { data: mine, labelColumn: 'f0' })).toThrow(
      `this peer's --label-column f0 differs from job "run-x"'s "label"`,
    );
    expect(() => tableOf({ id: 'run-y', config: { model: 'mlp', hyperparameters: {} } }, { data: mine })).toThrow(
      `on no table; drop --data ${mine}`,
    );
    expect(() => tableOf({ id: 'run-y', config: { model: 'mlp', hyperparameters: {} } }, { labels })).toThrow(
      `on no table; drop --labels ${labels}`,
    );
    expect(tableOf({ id: 'run-y', config: { model: 'mlp', hyperparameters: {} } }, { data: dir })).toBeUndefined(); // an IDX directory

    const withLabels = {
      id: 'run-z',
      config: {
        model: 'mlp',
        hyperparameters: {
          table: 'mine.csv',
          tableSha256: sha(TABLE),
          labels: 'labels.txt',
          labelsSha256: sha(LABELS),
        },
      },
    };
    expect(tableOf(withLabels, { data: mine, labels })).toEqual({ labels });
    expect(() => tableOf(withLabels, { data: mine })).toThrow('pass your copy of the labels too: --labels FILE');
    expect(() => tableOf(withLabels, { data: mine, labels: otherLabels })).toThrow(
      `this peer's --labels ${otherLabels} has SHA-256 ${sha(LABELS.replace('2', '1'))}, but job "run-z" trains on "labels.txt" with SHA-256 ${sha(LABELS)}`,
    );
  });

  it('a hand-started worker with another copy of the table is refused before it joins, naming both hashes', async () => {
    const mine = join(dir, 'job.csv');
    const other = join(dir, 'edited.csv');
    writeFileSync(mine, TABLE);
    writeFileSync(other, TABLE.replace('\n1,', '\n2,'));
    const job = {
      id: 'run-hand',
      token: 'hand-token-1234',
      config: {
        model: 'mlp',
        optimizer: 'sgd',
        hyperparameters: { lr: 0.05, table: 'job.csv', tableSha256: sha(TABLE), labelColumn: 'label' },
        batchPerPeer: 16,
        minPeers: 2,
        maxPeers: 2,
      },
    };
    const server = await startServer({ port: 0, host: '127.0.0.1', jobs: [job], staticDir: null });
    const before = process.env[TOKEN_ENV];
    process.env[TOKEN_ENV] = job.token; // the spawned worker reads it from its environment
    try {
      const r = await ringtrain([
        'worker',
        '--server',
        server.url,
        '--job',
        job.id,
        '--data',
        other,
        '--runtime',
        'deno',
      ]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(
        `this peer's --data ${other} has SHA-256 ${sha(TABLE.replace('\n1,', '\n2,'))}, but job "${job.id}" trains on "job.csv" with SHA-256 ${sha(TABLE)}`,
      );
    } finally {
      if (before === undefined) delete process.env[TOKEN_ENV];
      else process.env[TOKEN_ENV] = before;
      await server.close();
    }
  }, 60_000);

  it('trains over real WebRTC, every rank with the same split, to a sensible accuracy', async () => {
    const data = join(dir, 'three.csv');
    writeFileSync(data, TABLE);
    const r = await ringtrain([
      'run',
      '-np',
      '2',
      '--data',
      data,
      '--label-column',
      'label',
      '--steps',
      '60',
      '--batch',
      '8',
      '--optimizer',
      'adamw',
      '--lr',
      '0.02',
      '--runtime',
      'deno',
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(summary).toMatchObject({
      ok: true,
      steps: 60,
      size: 2,
      model: 'mlp',
      table_sha256: sha(TABLE),
      labels_sha256: null,
    });
    expect(summary.test_accuracy).toBeGreaterThan(0.9); // 60 held-out rows of three separable classes
    expect(summary.split_by_rank).toHaveLength(2);
    const [a, b] = summary.split_by_rank;
    expect(a).toMatchObject({ rank: 0, train: 240, test: 60 });
    expect(b).toEqual({ ...a, rank: 1 });
  }, 120_000);
});

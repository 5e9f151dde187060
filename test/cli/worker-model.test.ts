/**
 * A job's config comes from the server; a model file runs when it is imported.
 * So a worker never imports a file because the job names it: the worker's own
 * user passes it (`--model ./net.ts`), and it is checked against the job's
 * identity before it runs. These jobs name files that leave a marker behind
 * when imported; no marker may appear.
 *
 * And a worker refused at join (here: a model whose layout is not the job's)
 * leaves the job and exits at once, instead of holding its place.
 * Real server, real Deno workers.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { startServer } from '../../server/index.ts';
import { modelFileName } from '../../src/engine/model-file.node.ts';
import type { JobSpec } from '../../src/signaling/protocol.ts';
import { killStartedWorkers, requireNetns, startDenoWorker, until } from '../support/workers.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-worker-model-'));
afterAll(() => {
  killStartedWorkers();
  rmSync(dir, { recursive: true, force: true });
});

/** A file that, if anything imports it, writes `marker`. */
function trap(name: string, marker: string): string {
  const path = join(dir, name);
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(
    path,
    `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(marker)}, 'imported');\nexport default function model() { throw new Error('never a model'); }\n`,
  );
  return path;
}

function job(id: string, model: string, hyperparameters: Record<string, string | number> = {}): JobSpec {
  return {
    id,
    token: `token-${id}`,
    config: {
      model,
      optimizer: 'sgd',
      hyperparameters: { lr: 0.05, seed: 1, steps: 2, ...hyperparameters },
      batchPerPeer: 8,
      minPeers: 1,
      maxPeers: 2,
    },
  };
}

/** Resolves with the exit code, or fails naming what the worker said once `ms` have passed. */
async function exitWithin(w: ReturnType<typeof startDenoWorker>, ms: number): Promise<number | null> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>(
    (_, reject) =>
      (timer = setTimeout(() => reject(new Error(`the worker was still running ${ms} ms later:\n${w.stderr}`)), ms)),
  );
  try {
    return await Promise.race([w.exit, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('a worker and the model file a job names', () => {
  it('refuses a job naming a model file the worker was not given, without reading or running it', async () => {
    requireNetns();
    const marker = join(dir, 'ran-absolute');
    const abs = trap('evil.mjs', marker);
    const markerRel = join(dir, 'ran-relative');
    const rel = relative(process.cwd(), trap('evil2.mjs', markerRel)); // ../../tmp/… from the repository
    const markerNamed = join(dir, 'ran-named');
    const named = trap('evil3.mjs', markerNamed);
    const jobs = [
      job('absolute', abs),
      job('relative', rel.startsWith('.') ? rel : `./${rel}`),
      // A job that states an identity (as `ringtrain run` does) still gets no file loaded on its word.
      job('named', named, { modelName: await modelFileName(named), modelLayoutHash: '0123abcd' }),
    ];
    const server = await startServer({ jobs, staticDir: null, heartbeatMs: 20_000 });
    try {
      const workers = jobs.map((j) => startDenoWorker(server.url, j));
      const codes = await Promise.all(workers.map((w) => exitWithin(w, 120_000)));
      for (const [i, w] of workers.entries()) {
        expect(codes[i], w.stderr).not.toBe(0);
        expect(w.rank, w.stderr).toBeUndefined(); // never took a place in a ring
        expect(w.stderr).toMatch(/ERR_INVALID_ARGUMENT/);
      }
      expect(workers[0].stderr).toMatch(/records no model identity.*loads no file on the job's word/);
      expect(workers[2].stderr).toMatch(
        /trains the model file "evil3@[0-9a-f]{8}" \(layout hash "0123abcd"\), and a worker does not load a model file that the server names; pass your copy of it: ringtrain worker --model \.\/evil3\.ts/,
      );
      expect([existsSync(marker), existsSync(markerRel), existsSync(markerNamed)]).toEqual([false, false, false]);
      for (const j of jobs) expect(server.jobInfo(j.id)?.peers).toEqual([]);
    } finally {
      await server.close();
    }
  }, 180_000);

  it('refuses a --model whose bytes are not the job’s before running it', async () => {
    requireNetns();
    const jobsFile = trap('net.mjs', join(dir, 'ran-job-file'));
    const marker = join(dir, 'ran-mine');
    const mine = trap('mine/net.mjs', marker);
    const spec = job('other-bytes', jobsFile, {
      modelName: await modelFileName(jobsFile),
      modelLayoutHash: '0123abcd',
    });
    const server = await startServer({ jobs: [spec], staticDir: null, heartbeatMs: 20_000 });
    try {
      const w = startDenoWorker(server.url, spec, ['--model', mine]);
      expect(await exitWithin(w, 120_000), w.stderr).not.toBe(0);
      expect(w.stderr).toMatch(
        /model file .*mine\/net\.mjs is net@[0-9a-f]{8} but job "other-bytes" trains "net@[0-9a-f]{8}": the names or bytes differ, so it was not loaded; pass the job's own file with --model/,
      );
      expect(existsSync(marker)).toBe(false);
    } finally {
      await server.close();
    }
  }, 180_000);

  it('a worker whose model is not the job’s exits non-zero within seconds of the refusal and leaves the job', async () => {
    requireNetns();
    // The job's file and name, with another layout hash: the worker loads its copy, builds it and finds the layouts
    // differ.
    const net = join(dir, 'net.ts');
    copyFileSync(fileURLToPath(new URL('../../examples/my-model.ts', import.meta.url)), net);
    const spec = job('layout', net, { modelName: await modelFileName(net), modelLayoutHash: 'ffffffff' });
    const server = await startServer({ jobs: [spec], staticDir: null, heartbeatMs: 20_000 });
    try {
      const w = startDenoWorker(server.url, spec, ['--model', net]);
      // From the refusal on, a few seconds (the GPU and the server connection are let go); never a hang.
      await until(
        () => /but the job's is net@/.test(w.stderr) || w.child.exitCode !== null,
        'the refusal',
        120_000,
        () => w.stderr,
      );
      expect(await exitWithin(w, 10_000), w.stderr).toBe(1);
      expect(w.stderr).toMatch(
        /this peer's model is net@[0-9a-f]{8} \(layout hash [0-9a-f]+\) but the job's is net@[0-9a-f]{8} \(layout hash ffffffff\).*\[ERR_INVALID_ARGUMENT\]/,
      );
      expect(server.jobInfo('layout')?.peers).toEqual([]);
      expect(readFileSync(net, 'utf8')).toContain('export default');
    } finally {
      await server.close();
    }
  }, 180_000);

  it('a worker refused for a setting it cannot train exits non-zero within seconds and leaves the job', async () => {
    requireNetns();
    // A bad setting is refused by the server when the job is added (test/server/membership.test.ts);
    // a model this peer does not know is the worker's own refusal.
    const spec = job('settings', 'resnet');
    const server = await startServer({ jobs: [spec], staticDir: null, heartbeatMs: 20_000 });
    try {
      const w = startDenoWorker(server.url, spec);
      await until(
        () => /resnet/.test(w.stderr) || w.child.exitCode !== null,
        'the refusal',
        120_000,
        () => w.stderr,
      );
      expect(await exitWithin(w, 10_000), w.stderr).toBe(1);
      expect(w.stderr).toMatch(
        /the job trains model 'resnet', which this peer does not know .*\[ERR_INVALID_ARGUMENT\]/,
      );
      expect(w.rank).toBeUndefined();
      expect(server.jobInfo('settings')?.peers).toEqual([]);
    } finally {
      await server.close();
    }
  }, 180_000);
});

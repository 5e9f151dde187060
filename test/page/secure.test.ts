/**
 * Secrets and transport, end to end: the server over https/wss with a test
 * certificate made by openssl; two Deno workers (the launcher's default) that
 * trust the test CA (DENO_CERT) and read their token from RINGTRAIN_TOKEN; a
 * Chromium tab (--ignore-certificate-errors, the test CA is not in its store)
 * that opens the page with `#token=…`. The three train one job together: the
 * workers link to each other by TCP and to the tab by real WebRTC, in one ring;
 * nothing above the links knows, and all three finish every step. The token is
 * in no argv, is gone from the tab's address, and no public endpoint shows the job.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { get } from 'node:https';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { makeTestCert } from '../server/test-cert.ts';
import { openTab, usePageFixture, waitForTrainingEnd } from './serve-page.ts';
import { recoveryArgs } from '../support/workers.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const STEPS = 4;
const JOB = {
  id: 'secure',
  token: 'tok-secure-7f3a',
  config: {
    model: 'mlp',
    optimizer: 'sgd',
    hyperparameters: { lr: 0.05, steps: STEPS, seed: 5 },
    batchPerPeer: 32,
    minPeers: 3,
    maxPeers: 3,
  },
};
const cert = makeTestCert();
const fx = usePageFixture(
  { jobs: [JOB], tls: { cert: cert.cert, key: cert.key } },
  { extraArgs: ['--ignore-certificate-errors'] },
);
afterAll(() => cert.dispose());

/** A GET without credentials, trusting the test CA: what anyone on the network could read. */
function httpsText(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    get(url, { ca: cert.ca }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
    }).on('error', reject);
  });
}

interface Worker {
  child: ChildProcess;
  stdout: string;
  stderr: string;
  exit: Promise<number | null>;
}

/** A Deno worker that finds its token in RINGTRAIN_TOKEN and trusts the test CA; `--json` prints its summary last. */
function secureWorker(name: string): Worker {
  const child = spawn(
    'node_modules/.bin/deno',
    [
      'run',
      '-A',
      'src/cli/main.ts',
      'worker',
      '--server',
      fx.server.url,
      '--job',
      JOB.id,
      '--name',
      name,
      '--json',
      ...recoveryArgs(name),
    ],
    {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, RINGTRAIN_TOKEN: JOB.token, DENO_CERT: cert.caPath },
    },
  );
  const w: Worker = {
    child,
    stdout: '',
    stderr: '',
    exit: new Promise((resolve) => child.on('exit', (code) => resolve(code))),
  };
  child.stdout!.on('data', (d) => (w.stdout += String(d)));
  child.stderr!.on('data', (d) => (w.stderr += String(d)));
  return w;
}

type Summary = {
  rank: number;
  steps: number;
  size: number;
  runtime: string;
  links: { peer: number; transport: string }[];
  weights_crc32: number;
};

describe('the page and two workers over wss, the token out of argv and URLs', () => {
  it(
    'two Deno workers (TCP between them) and a tab (WebRTC) train in one ring over https/wss; the token shows nowhere public',
    { timeout: 600_000 },
    async () => {
      expect(fx.server.url).toMatch(/^https:/);
      const { page, errors } = await openTab(fx.browser, `${fx.server.url}/?job=${JOB.id}#token=${JOB.token}`);
      // The token was read, then taken out of the address bar; the panel got the job with it.
      await page.waitForSelector('[data-testid=job][data-state=ok]', { timeout: 60_000 });
      expect(page.url()).toBe(`${fx.server.url}/?job=${JOB.id}`);
      expect(await page.evaluate(() => location.href + history.length)).not.toContain(JOB.token);
      // A reload of the tab still knows the token (sessionStorage), not the address.
      await page.reload();
      await page.waitForSelector('[data-testid=job][data-state=ok]', { timeout: 60_000 });

      // Public endpoints (no token): the job is not listed; its token appears in none.
      for (const path of ['/api/jobs', `/api/jobs/${JOB.id}`, '/metrics', '/healthz', '/']) {
        const body = await httpsText(`${fx.server.url}${path}`);
        expect(body, path).not.toContain(JOB.token);
        if (path.startsWith('/api/jobs')) expect(body, path).not.toContain('"peers"');
      }

      const workers = [secureWorker('deno-a'), secureWorker('deno-b')];
      try {
        for (const w of workers) {
          const argv = readFileSync(`/proc/${w.child.pid}/cmdline`, 'utf8');
          expect(argv).toContain('worker');
          expect(argv).not.toContain(JOB.token);
        }

        await page.waitForSelector('[data-testid=join]:not([disabled])', { timeout: 120_000 });
        await page.click('[data-testid=join]');
        const note = await waitForTrainingEnd(page, errors, 400_000).catch((err: Error) => {
          throw new Error(`${err.message}\nworkers: ${workers.map((w) => w.stderr.slice(-1500)).join('\n')}`);
        });
        expect(note, workers.map((w) => w.stderr.slice(-1500)).join('\n')).toContain(
          `Training finished: ${STEPS} steps`,
        );
        const tabRank = Number(await page.getAttribute('[data-testid=participate]', 'data-rank'));
        const codes = await Promise.all(workers.map((w) => w.exit));
        const summaries = workers.map((w) => JSON.parse(w.stdout.trim().split('\n').pop()!) as Summary);
        for (const [i, s] of summaries.entries()) {
          const { stderr } = workers[i];
          expect(s, stderr).toMatchObject({ steps: STEPS, size: 3, runtime: 'deno' });
          // 3: the ring closed in the final evaluation, after the last step (see join.test.ts).
          expect([0, 3], stderr).toContain(codes[i]);
          expect(stderr).not.toContain('warning: --token');
          // The workers link to each other by TCP, and to the tab (which cannot dial) by WebRTC.
          expect(s.links).toEqual(
            expect.arrayContaining([
              { peer: summaries[1 - i].rank, transport: 'tcp' },
              { peer: tabRank, transport: 'webrtc' },
            ]),
          );
        }
        expect(summaries[0].weights_crc32).toBe(summaries[1].weights_crc32);
        expect(errors).toEqual([]);
      } finally {
        for (const w of workers) w.child.kill('SIGKILL');
        await page.close();
      }
    },
  );

  it('accepts the older ?token= link too, and strips it from the address', { timeout: 120_000 }, async () => {
    const { page, errors } = await openTab(fx.browser, `${fx.server.url}/?job=${JOB.id}&token=${JOB.token}&steps=3`);
    // The job the test before trained has finished by now: the page shows it as finished, which it can only with the
    // token.
    await page.waitForSelector('[data-testid=job][data-state=ok], [data-testid=job][data-state=finished]', {
      timeout: 60_000,
    });
    expect(page.url()).toBe(`${fx.server.url}/?job=${JOB.id}&steps=3`);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('says why it cannot show a job when the link has a wrong token', { timeout: 120_000 }, async () => {
    const { page } = await openTab(fx.browser, `${fx.server.url}/?job=${JOB.id}#token=wrong`);
    await page.waitForSelector('[data-testid=job][data-state=error]', { timeout: 60_000 });
    expect(await page.textContent('[data-testid=job-status]')).toContain(
      `the server shows no job '${JOB.id}' to this page`,
    );
    await page.close();
  });
});

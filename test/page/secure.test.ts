/**
 * Secrets and transport, end to end: the server over https/wss with a test
 * certificate made by openssl; a Deno worker (the launcher's default) that
 * trusts the test CA (DENO_CERT) and reads its token from RINGTRAIN_TOKEN; a Chromium
 * tab (--ignore-certificate-errors, the test CA is not in its store) that
 * opens the page with `#token=…`. They train one job together over real
 * WebRTC. The token is in no argv, is gone from the tab's address, and no
 * public endpoint shows the job.
 */
import { spawn } from 'node:child_process';
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
    minPeers: 2,
    maxPeers: 2,
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

describe('the page and a worker over wss, the token out of argv and URLs', () => {
  it(
    'a Deno worker and a tab train together over https/wss; the token shows nowhere public',
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

      const worker = spawn(
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
          'deno-worker',
          '--json',
          ...recoveryArgs(),
        ],
        {
          cwd: ROOT,
          stdio: ['ignore', 'pipe', 'pipe'],
          env: { ...process.env, RINGTRAIN_TOKEN: JOB.token, DENO_CERT: cert.caPath },
        },
      );
      let stdout = '';
      let stderr = '';
      worker.stdout.on('data', (d) => (stdout += String(d)));
      worker.stderr.on('data', (d) => (stderr += String(d)));
      const exit = new Promise<number | null>((resolve) => worker.on('exit', (code) => resolve(code)));
      try {
        const argv = readFileSync(`/proc/${worker.pid}/cmdline`, 'utf8');
        expect(argv).toContain('worker');
        expect(argv).not.toContain(JOB.token);

        await page.waitForSelector('[data-testid=join]:not([disabled])', { timeout: 120_000 });
        await page.click('[data-testid=join]');
        const note = await waitForTrainingEnd(page, errors, 400_000).catch((err: Error) => {
          throw new Error(`${err.message}\nworker: ${stderr.slice(-2000)}`);
        });
        expect(note, stderr.slice(-3000)).toContain(`Training finished: ${STEPS} steps`);
        const code = await exit;
        const summary = JSON.parse(stdout.trim().split('\n').pop()!) as {
          steps: number;
          size: number;
          runtime: string;
        };
        expect(summary, stderr).toMatchObject({ steps: STEPS, size: 2, runtime: 'deno' });
        // 3: the ring closed in the final evaluation, after the last step (see join.test.ts).
        expect([0, 3], stderr).toContain(code);
        expect(stderr).not.toContain('warning: --token');
        expect(errors).toEqual([]);
      } finally {
        worker.kill('SIGKILL');
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

/**
 * The server container's arguments, as the rendered Deployment gives them,
 * run by the real `ringtrain server`: it starts, answers the probe path
 * (/healthz) and the scrape path (/metrics) the manifest names, and opens the
 * job the values describe, with the token read from the mounted Secret file.
 * Only the listening address and the file paths change (a pod's become this
 * test's).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { renderManifests } from '../../deploy/k8s/render.ts';
import { parseValues } from '../../deploy/k8s/values.ts';
import { until } from '../support/workers.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-k8s-args-'));
const servers: ChildProcess[] = [];
afterAll(() => {
  for (const server of servers) server.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/**
 * Starts `ringtrain` with a rendered container's arguments, here: on loopback at a free port, with
 * each mounted path moved by `mount` to where this test wrote the file; answers the URL it listens on
 * and what it has printed so far.
 */
async function serveWith(podArgs: string[], mount: (arg: string) => string): Promise<{ url: string; output: () => string }> {
  const args = podArgs.map((a, i, all) => (all[i - 1] === '--host' ? '127.0.0.1' : all[i - 1] === '--port' ? '0' : mount(a)));
  const child = spawn(process.execPath, ['bin/ringtrain.js', ...args, '--no-static'], { stdio: ['ignore', 'pipe', 'pipe'] });
  servers.push(child);
  let out = '';
  let err = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (err += d));
  await until(() => /listening on (http\S+)/.test(out) || child.exitCode !== null, 'the server to listen', 60_000);
  const url = /listening on (http\S+)/.exec(out)?.[1];
  expect(url, err).toBeDefined();
  return { url: url!, output: () => out };
}

describe('the rendered server arguments', () => {
  it('start the real server with the job, /healthz and /metrics', async () => {
    const values = parseValues({ job: { id: 'digits', model: 'mlp', minPeers: 3, maxPeers: 6, fp16: true }, turn: { urls: ['turn:turn.example.org:3478'] } });
    const deployment = renderManifests(values).find((o) => o.kind === 'Deployment') as unknown as {
      spec: { template: { metadata: { annotations: Record<string, string> }; spec: { containers: { args: string[]; readinessProbe: { httpGet: { path: string } } }[] } } };
    };
    const pod = deployment.spec.template;
    const token = 'a1b2c3d4e5f6a7b8c9d0';
    writeFileSync(join(dir, 'token'), `${token}\n`);
    writeFileSync(join(dir, 'secret'), 'turn-static-auth-secret\n');
    const { url } = await serveWith(pod.spec.containers[0].args, (a) => a.replace(/^\/var\/run\/secrets\/ringtrain\/(job|turn)/, dir));

    expect((await fetch(`${url}${pod.spec.containers[0].readinessProbe.httpGet.path}`)).status).toBe(200);
    const metrics = await fetch(`${url}${pod.metadata.annotations['prometheus.io/path']}`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toMatch(/^# HELP /m);
    const job = await fetch(`${url}/api/jobs/digits`, { headers: { authorization: `Bearer ${token}` } });
    expect(job.status, await job.clone().text()).toBe(200);
    expect(await job.json()).toMatchObject({ id: 'digits', config: { model: 'mlp', minPeers: 3, maxPeers: 6, hyperparameters: { elastic: true, compression: 'fp16' } } });
    // The token is the file's, not a random one: a wrong bearer sees nothing.
    expect((await fetch(`${url}/api/jobs/digits`, { headers: { authorization: 'Bearer wrong-token-wrong' } })).status).toBe(404);
  });

  it('open a table job from the file on the data volume, which tabs may download with the token', { timeout: 60_000 }, async () => {
    const values = parseValues({ job: { id: 'iris', model: 'mlp', data: '/data/iris.csv', labelColumn: 'species' }, dataVolume: { configMap: 'iris' } });
    const pod = (renderManifests(values).find((o) => o.kind === 'Deployment') as unknown as { spec: { template: { spec: { containers: { args: string[] }[] } } } }).spec.template;
    const csv = `a,b,species\n${Array.from({ length: 20 }, (_, i) => `${i},${i % 3},${i % 2}`).join('\n')}\n`;
    writeFileSync(join(dir, 'iris.csv'), csv);
    const token = 'f1e2d3c4b5a6f7e8d9c0';
    writeFileSync(join(dir, 'token'), `${token}\n`);
    const { url, output } = await serveWith(pod.spec.containers[0].args, (a) => a.replace(/^\/var\/run\/secrets\/ringtrain\/job/, dir).replace(/^\/data\//, `${dir}/`));
    const sha = createHash('sha256').update(csv).digest('hex');
    const job = await fetch(`${url}/api/jobs/iris`, { headers: { authorization: `Bearer ${token}` } });
    expect(await job.json()).toMatchObject({ config: { model: 'mlp', hyperparameters: { table: 'iris.csv', tableSha256: sha, labelColumn: 'species' } } });
    // The worker command it prints passes the worker's own copy.
    expect(output()).toContain(`ringtrain worker --server ${url} --job iris --data ${dir}/iris.csv`);
    const file = await fetch(`${url}/api/jobs/iris/files/${sha}`, { headers: { authorization: `Bearer ${token}` } });
    expect(await file.text()).toBe(csv);
  });
});

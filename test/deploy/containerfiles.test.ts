/**
 * The Containerfiles under deploy/containers, checked without a container
 * runtime (deploy/containers/lint.ts): pinned bases, a numeric non-root USER,
 * a HEALTHCHECK (on /healthz for the server), npm ci, no secret baked in; and
 * they agree with the manifests (user id, port, image names). Each rule is
 * shown to catch a file that breaks it. The server's /healthz itself is
 * tested in test/server/http.test.ts.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { lintContainerfile } from '../../deploy/containers/lint.ts';
import { renderManifests } from '../../deploy/k8s/render.ts';
import { parseValues } from '../../deploy/k8s/values.ts';

const FILES = [
  { name: 'server', servesHttp: true },
  { name: 'worker-node', servesHttp: false },
  { name: 'worker-deno', servesHttp: false },
];
const read = (name: string) => readFileSync(`deploy/containers/${name}.Containerfile`, 'utf8');

const GOOD = [
  'FROM docker.io/library/node:20.20.2-bookworm-slim AS build',
  'RUN npm ci',
  'FROM docker.io/library/node:20.20.2-bookworm-slim',
  'COPY --from=build /src/app ./app',
  'USER 10001:10001',
  'HEALTHCHECK CMD ["node", "-e", "fetch(\'http://127.0.0.1:8080/healthz\')"]',
].join('\n');

describe('Containerfiles', () => {
  for (const f of FILES) {
    it(`${f.name} passes the lint`, () => {
      expect(lintContainerfile(read(f.name), { servesHttp: f.servesHttp })).toEqual([]);
    });
  }

  it('agree with the manifests: user id, the server port, image names', () => {
    const objects = renderManifests(parseValues({})) as unknown as { kind: string; spec: { template: { spec: { securityContext: { runAsUser: number }; containers: { image: string; ports?: { containerPort: number }[] }[] } } } }[];
    for (const f of FILES) expect(read(f.name)).toMatch(/^USER 10001:10001$/m);
    for (const o of objects.filter((x) => x.kind === 'Deployment' || x.kind === 'StatefulSet')) expect(o.spec.template.spec.securityContext.runAsUser).toBe(10001);
    const server = objects.find((o) => o.kind === 'Deployment')!.spec.template.spec.containers[0];
    expect(read('server')).toContain(`EXPOSE ${server.ports![0].containerPort}`);
    expect(read('server')).toContain(`127.0.0.1:${server.ports![0].containerPort}/healthz`);
    expect(server.image).toMatch(/\/ringtrain-server:/);
    expect(parseValues({ workers: { runtime: 'deno' } }).images.worker).toMatch(/\/ringtrain-worker-deno:/);
    expect(parseValues({}).images.worker).toMatch(/\/ringtrain-worker-node:/);
  });

  it('the build context leaves out secrets and local state', () => {
    const ignore = readFileSync('.dockerignore', 'utf8').split('\n');
    for (const pattern of ['**/node_modules', '**/*.pem', '**/*.key', '**/.env*', '.git']) expect(ignore).toContain(pattern);
  });

  it('the lint catches each broken rule', () => {
    expect(lintContainerfile(GOOD, { servesHttp: true })).toEqual([]);
    const broken: [string, RegExp][] = [
      [GOOD.replace('node:20.20.2-bookworm-slim\nCOPY', 'node:latest\nCOPY'), /base image docker.io\/library\/node:latest is not pinned/],
      [GOOD.replace('FROM docker.io/library/node:20.20.2-bookworm-slim AS build', 'FROM node AS build'), /base image node is not pinned/],
      [GOOD.replace('USER 10001:10001', 'USER root'), /runs as root/],
      [GOOD.replace('USER 10001:10001', 'USER ringtrain'), /USER ringtrain is a name/],
      [GOOD.replace('USER 10001:10001\n', ''), /never sets USER/],
      [GOOD.replace(/HEALTHCHECK.*/, 'HEALTHCHECK NONE'), /does not ask \/healthz/],
      [GOOD.replace(/HEALTHCHECK.*/, ''), /no HEALTHCHECK/],
      [`${GOOD}\nENV RINGTRAIN_TOKEN=abc123`, /ENV RINGTRAIN_TOKEN bakes a secret/],
      [`${GOOD}\nARG TURN_SECRET`, /ARG TURN_SECRET bakes a secret/],
      [`${GOOD}\nCOPY tls/server.key /app/`, /copies a key or token file/],
      [GOOD.replace('npm ci', 'npm install'), /use npm ci/],
    ];
    for (const [text, problem] of broken) expect(lintContainerfile(text, { servesHttp: true }).join('\n'), text).toMatch(problem);
    // A worker may say NONE: it serves no HTTP.
    expect(lintContainerfile(GOOD.replace(/HEALTHCHECK.*/, 'HEALTHCHECK NONE'), { servesHttp: false })).toEqual([]);
    // Continuation lines are one instruction.
    expect(lintContainerfile(GOOD.replace('RUN npm ci', 'RUN apt-get update \\\n && npm ci'), { servesHttp: true })).toEqual([]);
  });
});

/**
 * The Kubernetes manifests (deploy/k8s): every object `ringtrain k8s render`
 * makes, from the defaults and from non-default values, validates against the
 * Kubernetes API schemas (kubernetes-models); the objects wire up as a person
 * would check by hand (selectors, secrets, probes, scrape annotations, GPU
 * requests); the committed examples are what the renderer makes today; and
 * wrong values are refused naming the field.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { Job } from 'kubernetes-models/batch/v1';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { Secret, Service } from 'kubernetes-models/v1';
import { renderManifests, type K8sObject } from '../../deploy/k8s/render.ts';
import { parseValues } from '../../deploy/k8s/values.ts';
import { toYaml } from '../../deploy/k8s/yaml.ts';
import { readValuesFile } from '../../src/cli/commands/k8s.node.ts';

const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  'apps/v1/Deployment': Deployment,
  'apps/v1/StatefulSet': StatefulSet,
  'batch/v1/Job': Job,
  'networking.k8s.io/v1/Ingress': Ingress,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'v1/Secret': Secret,
  'v1/Service': Service,
};

/** Validates one object against its API schema; an object of a kind we do not know fails the test. */
function validate(o: K8sObject): void {
  const Model = MODELS[`${o.apiVersion}/${o.kind}`];
  expect(Model, `${o.apiVersion} ${o.kind}`).toBeDefined();
  expect(() => new Model(o as never).validate(), `${o.kind} ${o.metadata.name}`).not.toThrow();
}

const byKind = (objects: K8sObject[], kind: string) => objects.filter((o) => o.kind === kind);
/** Rendered objects are plain JSON; the tests walk into them freely. */
type Any = any;

describe('k8s manifests', () => {
  it('validate against the Kubernetes schemas, and a broken object does not', () => {
    const objects = renderManifests(parseValues({}));
    expect(objects.map((o) => o.kind)).toEqual(['Deployment', 'Service', 'Service', 'StatefulSet', 'NetworkPolicy']);
    for (const o of objects) validate(o);
    // The check can fail: a port given as text is refused by the schema.
    const broken = structuredClone(objects[0]) as Any;
    broken.spec.template.spec.containers[0].ports[0].containerPort = '8080';
    expect(() => new Deployment(broken).validate()).toThrow(/containerPort must be integer/);
  });

  it('render non-default values: GPU workers, TLS ingress, TURN, secrets, another port and namespace', () => {
    const values = { ...readValuesFile('deploy/k8s/examples/elastic-gpu-tls.values.json'), secrets: { create: true, jobToken: 'f00dfeedf00dfeedf00d', turnSecret: 'coturn-static-auth-secret' } };
    const objects = renderManifests(parseValues(values));
    for (const o of objects) validate(o);
    expect(objects.map((o) => o.kind)).toEqual(['Secret', 'Secret', 'Deployment', 'Service', 'Ingress', 'Service', 'StatefulSet', 'NetworkPolicy']);
    expect(objects.every((o) => o.metadata.namespace === 'ml-jobs' && o.metadata.name.startsWith('digits-'))).toBe(true);

    const server = byKind(objects, 'Deployment')[0] as Any;
    const pod = server.spec.template;
    const container = pod.spec.containers[0];
    expect(pod.metadata.annotations).toEqual({ 'prometheus.io/scrape': 'true', 'prometheus.io/port': '9090', 'prometheus.io/path': '/metrics' });
    expect(container.readinessProbe.httpGet).toEqual({ path: '/healthz', port: 'http' });
    expect(container.ports[0].containerPort).toBe(9090);
    expect(container.args.join(' ')).toContain('--job cnn-digits --token-file /var/run/secrets/ringtrain/job/token --model cnn --optimizer adamw --batch 32 --epochs 5 --min-peers 2 --max-peers 16 --hp elastic=true compression=fp16');
    expect(container.args.join(' ')).toContain('--stun stun:turn.example.org:3478 --turn turn:turn.example.org:3478 --turn-secret-file /var/run/secrets/ringtrain/turn/secret');
    // Secrets reach the containers as files, never as environment values or arguments.
    expect(JSON.stringify(server)).not.toContain('f00dfeed');
    expect(pod.spec.volumes.map((v: Any) => v.secret?.secretName).filter(Boolean)).toEqual(['digits-job-token', 'digits-turn']);
    const secrets = byKind(objects, 'Secret') as Any[];
    expect(secrets.map((s) => [s.metadata.name, Object.keys(s.stringData)])).toEqual([['digits-job-token', ['token']], ['digits-turn', ['secret']]]);
    expect(pod.spec.securityContext).toMatchObject({ runAsNonRoot: true });

    const service = byKind(objects, 'Service')[0] as Any;
    expect(service.spec.selector).toEqual(server.spec.selector.matchLabels);
    const ingress = byKind(objects, 'Ingress')[0] as Any;
    expect(ingress.spec.tls).toEqual([{ hosts: ['ringtrain.example.org'], secretName: 'ringtrain-example-org-tls' }]);
    expect(ingress.spec.rules[0].http.paths[0].backend.service).toEqual({ name: service.metadata.name, port: { name: 'http' } });

    const workers = byKind(objects, 'StatefulSet')[0] as Any;
    const worker = workers.spec.template.spec.containers[0];
    expect(workers.spec.replicas).toBe(4);
    expect(workers.spec.selector.matchLabels).toEqual(workers.spec.template.metadata.labels);
    expect(worker.resources.limits['nvidia.com/gpu']).toBe('1');
    expect(worker.env).toContainEqual({ name: 'NVIDIA_DRIVER_CAPABILITIES', value: 'compute,utility,graphics' });
    expect(worker.args).toEqual(['worker', '--server', 'http://digits-server.ml-jobs.svc:9090', '--job', 'cnn-digits', '--token-file', '/var/run/secrets/ringtrain/job/token', '--runtime', 'node', '--listen', '0.0.0.0:7070', '--advertise', '$(POD_IP)', '--link-tls', '--name', '$(POD_NAME)']);
  });

  it('open the workers\' TCP link port to the job\'s own workers and server only; WebRTC\'s UDP stays open', () => {
    const objects = renderManifests(parseValues({ name: 'digits', workers: { links: { port: 7443 } } }));
    for (const o of objects) validate(o);
    const workers = byKind(objects, 'StatefulSet')[0] as Any;
    const server = byKind(objects, 'Deployment')[0] as Any;
    const worker = workers.spec.template.spec.containers[0];
    expect(worker.ports).toEqual([{ name: 'links', containerPort: 7443, protocol: 'TCP' }]);
    expect(worker.args.join(' ')).toContain('--listen 0.0.0.0:7443 --advertise $(POD_IP) --name');
    expect(worker.args).not.toContain('--link-tls');
    // $(POD_IP) is expanded from the container's environment: the pod's own address.
    expect(worker.env).toContainEqual({ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } });

    const [policy] = byKind(objects, 'NetworkPolicy') as Any[];
    expect(policy.metadata.namespace).toBe(workers.metadata.namespace);
    // It guards the worker pods, and only they...
    expect(policy.spec.podSelector.matchLabels).toEqual(workers.spec.template.metadata.labels);
    expect(policy.spec.policyTypes).toEqual(['Ingress']);
    const [tcp, udp] = policy.spec.ingress;
    // ...admitting on the link port this instance's workers and its server, by their pods' labels, and no one else.
    expect(tcp.ports).toEqual([{ protocol: 'TCP', port: 7443 }]);
    expect(tcp.from).toEqual([{ podSelector: { matchLabels: workers.spec.template.metadata.labels } }, { podSelector: { matchLabels: server.spec.template.metadata.labels } }]);
    expect(tcp.from.every((f: Any) => f.podSelector.matchLabels['app.kubernetes.io/instance'] === 'digits' && !f.ipBlock && !f.namespaceSelector)).toBe(true);
    // A policy denies what it does not admit: WebRTC (tabs, TURN relays) keeps its UDP from anywhere, and no TCP port but the link port opens.
    expect(udp).toEqual({ ports: [{ protocol: 'UDP' }] });
    expect(policy.spec.ingress).toHaveLength(2);

    // Links off: no port, no flags, no policy; a link port on the server's port is refused.
    const off = renderManifests(parseValues({ workers: { links: { enabled: false } } }));
    expect(byKind(off, 'NetworkPolicy')).toHaveLength(0);
    const offWorker = (byKind(off, 'StatefulSet')[0] as Any).spec.template.spec.containers[0];
    expect(offWorker.ports).toBeUndefined();
    expect(offWorker.args).not.toContain('--listen');
    expect(() => parseValues({ server: { port: 7070 } })).toThrow(/workers\.links\.port \(7070\) is server\.port too/);
  });

  it('render a fixed run as an indexed Job of exactly minPeers workers', () => {
    const objects = renderManifests(readValuesFile('deploy/k8s/examples/fixed-job.values.json'));
    for (const o of objects) validate(o);
    const job = byKind(objects, 'Job')[0] as Any;
    expect(job.spec).toMatchObject({ completionMode: 'Indexed', completions: 3, parallelism: 3 });
    expect(job.spec.template.spec.restartPolicy).toBe('OnFailure');
    expect(byKind(objects, 'StatefulSet')).toHaveLength(0);
  });

  it('committed examples are what the renderer makes now', () => {
    const cases: [string, unknown][] = [
      ['default', {}],
      ['elastic-gpu-tls', JSON.parse(readFileSync('deploy/k8s/examples/elastic-gpu-tls.values.json', 'utf8'))],
      ['fixed-job', JSON.parse(readFileSync('deploy/k8s/examples/fixed-job.values.json', 'utf8'))],
    ];
    for (const [name, values] of cases) {
      const committed = readFileSync(`deploy/k8s/examples/${name}.yaml`, 'utf8');
      expect(committed, `deploy/k8s/examples/${name}.yaml is stale: re-render it (docs/KUBERNETES.md)`).toBe(toYaml(renderManifests(parseValues(values))));
      // Nothing secret in git: committed examples reference Secrets made with kubectl.
      expect(committed).not.toContain('kind: "Secret"');
    }
  });

  it('render a text or a table job: the server and every worker read the file from the data volume, mounted read-only', () => {
    const text = renderManifests(parseValues({ job: { model: 'transformer', text: '/corpus/book.txt', context: 32 }, dataVolume: { configMap: 'book', mountPath: '/corpus' } }));
    for (const o of text) validate(o);
    const server = (byKind(text, 'Deployment')[0] as Any).spec.template.spec;
    const worker = (byKind(text, 'StatefulSet')[0] as Any).spec.template.spec;
    expect(server.containers[0].args.join(' ')).toContain('--model transformer --optimizer sgd');
    expect(server.containers[0].args.join(' ')).toContain('--text /corpus/book.txt --context 32');
    expect(worker.containers[0].args.join(' ')).toContain('--text /corpus/book.txt --name $(POD_NAME)');
    for (const pod of [server, worker]) {
      expect(pod.containers[0].volumeMounts).toContainEqual({ name: 'job-data', mountPath: '/corpus', readOnly: true });
      expect(pod.volumes).toContainEqual({ name: 'job-data', configMap: { name: 'book' } });
    }
    // The bundled corpus needs no volume: the images carry it.
    const brown = renderManifests(parseValues({ job: { model: 'transformer', text: '@brown' } }));
    expect((byKind(brown, 'StatefulSet')[0] as Any).spec.template.spec.containers[0].args).toContain('@brown');

    const table = renderManifests(parseValues({ job: { model: 'mlp', data: '/data/x.npy', labels: '/data/y.npy' }, dataVolume: { persistentVolumeClaim: 'features' } }));
    for (const o of table) validate(o);
    const tableServer = (byKind(table, 'Deployment')[0] as Any).spec.template.spec;
    expect(tableServer.containers[0].args.join(' ')).toContain('--data /data/x.npy --labels /data/y.npy');
    expect(tableServer.volumes).toContainEqual({ name: 'job-data', persistentVolumeClaim: { claimName: 'features', readOnly: true } });
    expect((byKind(table, 'StatefulSet')[0] as Any).spec.template.spec.containers[0].args.join(' ')).toContain('--data /data/x.npy --labels /data/y.npy --name');
  });

  it('refuse a job file the pods cannot read, saying what to do', () => {
    expect(() => parseValues({ job: { model: 'transformer', text: './book.txt' } })).toThrow(
      'k8s values: job.text "./book.txt" is a file the pods cannot read: the manifests run on other machines. Put it in a ConfigMap (kubectl -n ringtrain create configmap ringtrain-data --from-file=book.txt) or a PersistentVolumeClaim, name it in dataVolume.configMap (or dataVolume.persistentVolumeClaim), and give its path inside the pods: job.text: /data/book.txt; or train on the bundled corpus: job.text: @brown.',
    );
    const cases: [unknown, RegExp][] = [
      [{ job: { model: 'mlp', data: '/home/me/iris.csv', labelColumn: 'species' }, dataVolume: { configMap: 'iris' } }, /job\.data "\/home\/me\/iris\.csv" is not on dataVolume, which the pods see at \/data: give \/data\/iris\.csv/],
      [{ job: { model: 'transformer', text: '@shakespeare' } }, /no such bundled corpus; the images carry @brown/],
      [{ job: { text: '@brown' } }, /job\.text trains the transformer: set job\.model to transformer \(it is cnn\)/],
      [{ job: { model: 'mlp', data: '/data/iris.csv' }, dataVolume: { configMap: 'iris' } }, /needs one of job\.labelColumn .* or job\.labels/],
      [{ job: { model: 'mlp', data: '/data/x.csv', labelColumn: 'y' }, dataVolume: {} }, /dataVolume names one of configMap or persistentVolumeClaim/],
    ];
    for (const [values, message] of cases) expect(() => parseValues(values), JSON.stringify(values)).toThrow(message);
  });

  it('refuse wrong values, naming the field', () => {
    const cases: [unknown, RegExp][] = [
      [{ workers: { replicas: 'four' } }, /workers\.replicas: .*expected number/],
      [{ workers: { replicaz: 2 } }, /workers: .*replicaz/],
      [{ images: { server: 'ghcr.io/ringtrain/server:latest' } }, /images\.server: must carry an exact tag or a digest/],
      [{ images: { worker: 'ringtrain-worker' } }, /images\.worker: must carry an exact tag or a digest/],
      [{ job: { id: 'Not_A_Label' } }, /job\.id: must be a DNS label/],
      [{ job: { minPeers: 4, maxPeers: 2 } }, /job\.maxPeers \(2\) must be at least job\.minPeers \(4\)/],
      [{ workers: { replicas: 9 } }, /workers\.replicas \(9\) is more than job\.maxPeers \(8\)/],
      [{ workers: { kind: 'Job', replicas: 1 } }, /indexed Job of 1 workers never reaches job\.minPeers \(2\)/],
      [{ secrets: { create: true } }, /secrets\.create needs secrets\.jobToken/],
      [{ secrets: { create: true, jobToken: 'x'.repeat(16) }, turn: { urls: ['turn:t.example.org:3478'] } }, /needs secrets\.turnSecret/],
      [{ turn: { urls: ['http://t.example.org'] } }, /turn\.urls\.0: must be a turn: or turns: URL/],
      [{ server: { resources: { cpu: 'lots', memory: '1Gi' } } }, /server\.resources\.cpu: must be a Kubernetes quantity/],
    ];
    for (const [values, message] of cases) expect(() => parseValues(values), JSON.stringify(values)).toThrow(message);
  });
});

describe('toYaml', () => {
  it('quotes every string, so none reads back as a number or a boolean', () => {
    expect(toYaml([{ a: 'true', b: 3600, c: [{ d: '0755', e: [] }, 'x'], 'f g': {}, h: false }])).toBe(
      ['---', 'a: "true"', 'b: 3600', 'c:', '- d: "0755"', '  e: []', '- "x"', '"f g": {}', 'h: false', ''].join('\n'),
    );
  });
});

/**
 * The values a Kubernetes deployment of ringtrain is rendered from
 * (deploy/k8s/render.ts): one JSON file, every field optional, defaults here.
 * Checked with zod so a typo or a wrong type is refused with its path before
 * anything is rendered.
 */
import { z } from 'zod';
import { ErrorCode, RingtrainError } from '../../src/core/errors.ts';

/** A DNS-1123 label: what Kubernetes accepts as a name (and what job ids should look like here). */
const dnsLabel = z.string().regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, { error: 'must be a DNS label: lower-case letters, digits and -, at most 63 characters' });
/** An image reference with an exact tag or a digest: `latest` and bare names move under a running job. */
const pinnedImage = z
  .string()
  .regex(/^[a-z0-9./_-]+(:[A-Za-z0-9._-]+)?(@sha256:[a-f0-9]{64})?$/, { error: 'must be an image reference' })
  .refine((s) => /@sha256:/.test(s) || (/:[A-Za-z0-9._-]+$/.test(s.split('/').pop()!) && !s.endsWith(':latest')), { error: 'must carry an exact tag or a digest (not latest)' });
const quantity = z.string().regex(/^\d+(\.\d+)?(m|Ki|Mi|Gi|Ti|k|M|G)?$/, { error: 'must be a Kubernetes quantity like 500m, 2 or 4Gi' });
const resources = z.strictObject({ cpu: quantity, memory: quantity });

export const ValuesSchema = z.strictObject({
  /** Prefix of every object's name, and the app.kubernetes.io/instance label. */
  name: dnsLabel.default('ringtrain'),
  namespace: dnsLabel.default('ringtrain'),
  images: z
    .strictObject({
      server: pinnedImage.default('ghcr.io/ringtrain/ringtrain-server:0.1.0'),
      /** Default: the image of workers.runtime (ringtrain-worker-node or ringtrain-worker-deno). */
      worker: pinnedImage.optional(),
      pullPolicy: z.enum(['IfNotPresent', 'Always', 'Never']).default('IfNotPresent'),
    })
    .prefault({}),
  /** The one job the server opens (more jobs: --jobs-file, see docs/KUBERNETES.md). */
  job: z
    .strictObject({
      id: dnsLabel.default('mnist'),
      model: z.enum(['mlp', 'cnn', 'transformer']).default('cnn'),
      optimizer: z.enum(['sgd', 'adamw']).default('sgd'),
      batch: z.number().int().min(1).default(64),
      epochs: z.number().int().min(1).default(1),
      /** The ring trains while it has at least minPeers, and refuses peers beyond maxPeers. */
      minPeers: z.number().int().min(1).default(2),
      maxPeers: z.number().int().min(1).default(8),
      /** Elastic: workers may come and go (kubectl scale) and the ring re-forms at the next step. */
      elastic: z.boolean().default(true),
      fp16: z.boolean().default(false),
      /**
       * A text to train the transformer on: `@brown` (the corpus the images carry), or a file's path
       * inside the pods, on `dataVolume`. The server reads it too (it records its SHA-256, which every
       * worker's copy must match, and hands it to browser tabs that join).
       */
      text: z.string().min(1).optional(),
      /** With `text`: characters per window (default 64). */
      context: z.number().int().min(2).optional(),
      /** A table (.csv, .npy, .json) to train the mlp on: its path inside the pods, on `dataVolume`. */
      data: z.string().min(1).optional(),
      /** With `data`: the column that holds the class (a CSV header name, or a number) … */
      labelColumn: z.string().min(1).optional(),
      /** … or a file of one class number per row, inside the pods. */
      labels: z.string().min(1).optional(),
    })
    .prefault({}),
  /**
   * Where the job's text or table lives, mounted read-only at `mountPath` in the server and every
   * worker: a ConfigMap (files up to about 1 MiB: kubectl create configmap NAME --from-file=FILE) or a
   * PersistentVolumeClaim that several pods may read (ReadOnlyMany).
   */
  dataVolume: z
    .strictObject({
      configMap: dnsLabel.optional(),
      persistentVolumeClaim: dnsLabel.optional(),
      mountPath: z.string().regex(/^\/[^\s]*[^/\s]$/, { error: 'must be an absolute path like /data' }).default('/data'),
    })
    .optional(),
  server: z
    .strictObject({
      port: z.number().int().min(1024).max(65535).default(8080),
      resources: resources.default({ cpu: '500m', memory: '512Mi' }),
      /** Prometheus scrape annotations (prometheus.io/scrape, port, path) for /metrics. */
      prometheus: z.boolean().default(true),
    })
    .prefault({}),
  ingress: z
    .strictObject({
      enabled: z.boolean().default(false),
      host: z.string().regex(/^[a-z0-9.-]+$/, { error: 'must be a host name' }).default('ringtrain.example.org'),
      className: z.string().min(1).default('nginx'),
      /** A kubernetes.io/tls Secret holding the certificate for `host` (cert-manager can make it). */
      tlsSecret: dnsLabel.default('ringtrain-tls'),
    })
    .prefault({}),
  workers: z
    .strictObject({
      /** StatefulSet: a pool to scale up and down mid-run. Job: an indexed Job of `replicas` that ends with the run. */
      kind: z.enum(['StatefulSet', 'Job']).default('StatefulSet'),
      replicas: z.number().int().min(0).default(2),
      runtime: z.enum(['node', 'deno']).default('node'),
      resources: resources.default({ cpu: '2', memory: '4Gi' }),
      /**
       * TCP links between workers (issue 34): each worker listens on `port` in its pod and advertises
       * its pod IP; a NetworkPolicy admits only this job's workers and server to the port. `tls`
       * encrypts the links (--link-tls), for clusters whose pod network crosses untrusted links.
       */
      links: z
        .strictObject({
          enabled: z.boolean().default(true),
          port: z.number().int().min(1024).max(65535).default(7070),
          tls: z.boolean().default(false),
        })
        .prefault({}),
      gpu: z
        .strictObject({
          enabled: z.boolean().default(false),
          /** The device plugin's resource name. */
          resource: z.string().regex(/^[a-z0-9.-]+\/[a-z0-9.-]+$/, { error: 'must be a resource name like nvidia.com/gpu' }).default('nvidia.com/gpu'),
          count: z.number().int().min(1).default(1),
        })
        .prefault({}),
    })
    .prefault({}),
  secrets: z
    .strictObject({
      /** Render the Secrets from the values below; otherwise create them with kubectl (docs/KUBERNETES.md) and keep them out of git. */
      create: z.boolean().default(false),
      jobToken: z.string().regex(/^\S{16,}$/, { error: 'must be at least 16 characters without spaces' }).optional(),
      turnSecret: z.string().min(16).optional(),
    })
    .prefault({}),
  turn: z
    .strictObject({
      /** turn:host:port URLs; with them the server mints each peer's credentials from the TURN secret. */
      urls: z.array(z.string().regex(/^turns?:[^\s]+$/, { error: 'must be a turn: or turns: URL' })).default([]),
      stun: z.array(z.string().regex(/^stuns?:[^\s]+$/, { error: 'must be a stun: URL' })).default([]),
    })
    .prefault({}),
});

type ParsedValues = z.infer<typeof ValuesSchema>;
export type Values = ParsedValues & { images: ParsedValues['images'] & { worker: string } };
export type ValuesInput = z.input<typeof ValuesSchema>;

/** Values with their defaults filled in; refused with the path of the first wrong field. */
export function parseValues(input: unknown): Values {
  const parsed = ValuesSchema.safeParse(input ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const at = issue.path.length > 0 ? issue.path.join('.') : '(top level)';
    throw new RingtrainError(ErrorCode.InvalidArgument, `k8s values: ${at}: ${issue.message}.`, { path: issue.path.map(String) });
  }
  const v = { ...parsed.data, images: { ...parsed.data.images, worker: parsed.data.images.worker ?? `ghcr.io/ringtrain/ringtrain-worker-${parsed.data.workers.runtime}:0.1.0` } };
  if (v.job.maxPeers < v.job.minPeers) throw new RingtrainError(ErrorCode.InvalidArgument, `k8s values: job.maxPeers (${v.job.maxPeers}) must be at least job.minPeers (${v.job.minPeers}).`);
  if (v.workers.replicas > v.job.maxPeers) throw new RingtrainError(ErrorCode.InvalidArgument, `k8s values: workers.replicas (${v.workers.replicas}) is more than job.maxPeers (${v.job.maxPeers}); the server would refuse the extra workers.`);
  if (v.workers.kind === 'Job' && v.workers.replicas < v.job.minPeers) throw new RingtrainError(ErrorCode.InvalidArgument, `k8s values: an indexed Job of ${v.workers.replicas} workers never reaches job.minPeers (${v.job.minPeers}).`);
  checkJobData(v);
  if (v.workers.links.enabled && v.workers.links.port === v.server.port) throw new RingtrainError(ErrorCode.InvalidArgument, `k8s values: workers.links.port (${v.workers.links.port}) is server.port too; give the links another port.`);
  if (v.secrets.create && !v.secrets.jobToken) throw new RingtrainError(ErrorCode.InvalidArgument, 'k8s values: secrets.create needs secrets.jobToken (at least 16 characters; e.g. openssl rand -hex 16).');
  if (v.secrets.create && v.turn.urls.length > 0 && !v.secrets.turnSecret) throw new RingtrainError(ErrorCode.InvalidArgument, "k8s values: secrets.create with turn.urls needs secrets.turnSecret (the TURN server's static-auth-secret).");
  return v;
}

/** The corpora a job may name by `@`: the ones the images carry (src/data/text.node.ts). */
const BUNDLED_TEXTS = ['@brown'];

/**
 * A job's text or table must be where the pods can read it: a file on the machine that renders
 * the manifests is not, so a path is refused, naming what to do instead.
 */
function checkJobData(v: ParsedValues): void {
  const { job, dataVolume } = v;
  const bad = (message: string) => new RingtrainError(ErrorCode.InvalidArgument, `k8s values: ${message}`);
  if (job.text !== undefined && job.data !== undefined) throw bad('job.text and job.data are two data sets; give one.');
  if (job.data === undefined && (job.labelColumn !== undefined || job.labels !== undefined)) throw bad('job.labelColumn and job.labels go with job.data (a table).');
  if (job.text === undefined && job.context !== undefined) throw bad('job.context goes with job.text.');
  if (dataVolume && (dataVolume.configMap === undefined) === (dataVolume.persistentVolumeClaim === undefined)) {
    throw bad('dataVolume names one of configMap or persistentVolumeClaim (the volume the job\'s file is on).');
  }
  const inPods = (field: string, path: string, corpus: boolean): void => {
    if (corpus && path.startsWith('@')) {
      if (!BUNDLED_TEXTS.includes(path)) throw bad(`${field} ${path}: no such bundled corpus; the images carry ${BUNDLED_TEXTS.join(', ')}.`);
      return;
    }
    const name = path.split('/').pop() || 'FILE';
    const mount = dataVolume?.mountPath ?? '/data';
    if (!dataVolume) {
      throw bad(
        `${field} ${JSON.stringify(path)} is a file the pods cannot read: the manifests run on other machines. ` +
          `Put it in a ConfigMap (kubectl -n ${v.namespace} create configmap ${v.name}-data --from-file=${name}) or a PersistentVolumeClaim, ` +
          `name it in dataVolume.configMap (or dataVolume.persistentVolumeClaim), and give its path inside the pods: ${field}: ${mount}/${name}` +
          (corpus ? '; or train on the bundled corpus: job.text: @brown.' : '.'),
      );
    }
    if (!path.startsWith(`${mount}/`)) throw bad(`${field} ${JSON.stringify(path)} is not on dataVolume, which the pods see at ${mount}: give ${mount}/${name}.`);
  };
  if (job.text !== undefined) {
    if (job.model !== 'transformer') throw bad(`job.text trains the transformer: set job.model to transformer (it is ${job.model}).`);
    inPods('job.text', job.text, true);
  }
  if (job.data !== undefined) {
    if (job.model !== 'mlp') throw bad(`job.data is a table of rows: set job.model to mlp (it is ${job.model}).`);
    if ((job.labelColumn === undefined) === (job.labels === undefined)) throw bad('job.data needs one of job.labelColumn (the column that holds the class) or job.labels (a file of classes).');
    inPods('job.data', job.data, false);
    if (job.labels !== undefined) inPods('job.labels', job.labels, false);
  }
}

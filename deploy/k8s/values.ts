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
    })
    .prefault({}),
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
  if (v.secrets.create && !v.secrets.jobToken) throw new RingtrainError(ErrorCode.InvalidArgument, 'k8s values: secrets.create needs secrets.jobToken (at least 16 characters; e.g. openssl rand -hex 16).');
  if (v.secrets.create && v.turn.urls.length > 0 && !v.secrets.turnSecret) throw new RingtrainError(ErrorCode.InvalidArgument, "k8s values: secrets.create with turn.urls needs secrets.turnSecret (the TURN server's static-auth-secret).");
  return v;
}

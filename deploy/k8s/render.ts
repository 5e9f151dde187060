/**
 * Renders a Kubernetes deployment of ringtrain from values (./values.ts) as
 * plain API objects: the signaling server (Deployment of one replica, since
 * jobs live in its memory, + Service, + an Ingress with TLS for wss), the
 * workers (a StatefulSet to scale mid-run, or an indexed Job) with the
 * NetworkPolicy that admits only the job's own pods to their TCP link port,
 * and the Secrets they read the job token and the TURN secret from. Plain objects
 * rather than a Helm chart: the renderer is TypeScript like the rest, runs
 * anywhere Node or Deno runs, and the tests validate every object against
 * the Kubernetes schemas (docs/KUBERNETES.md says why).
 */
// Types only (erased at run time; kubernetes-models is a dev dependency): an object literal with a
// field the API does not have, or a value of the wrong type, fails `tsc`, which the schema check alone would let through.
import type { IDeployment, IStatefulSet } from 'kubernetes-models/apps/v1';
import type { IJob } from 'kubernetes-models/batch/v1';
import type { IIngress, INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import type { IPodSecurityContext, IPodTemplateSpec, ISecret, ISecretVolumeSource, ISecurityContext, IService } from 'kubernetes-models/v1';
import type { Values } from './values.ts';

export type K8sObject = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> } } & Record<string, unknown>;

/** Where the containers find their secrets: files, never environment variables (which `kubectl describe` and crash dumps show). */
const TOKEN_DIR = '/var/run/secrets/ringtrain/job';
const TURN_DIR = '/var/run/secrets/ringtrain/turn';
/** A non-root user the images create (deploy/containers/*.Containerfile). */
const RUN_AS_USER = 10001;

export function renderManifests(v: Values): K8sObject[] {
  const labels = (component: string) => ({ 'app.kubernetes.io/name': 'ringtrain', 'app.kubernetes.io/instance': v.name, 'app.kubernetes.io/component': component });
  const meta = (suffix: string, component: string, extra: Partial<K8sObject['metadata']> = {}) => ({ name: `${v.name}-${suffix}`, namespace: v.namespace, labels: labels(component), ...extra });
  const tokenSecret = `${v.name}-job-token`;
  const turnSecret = `${v.name}-turn`;
  const serverName = `${v.name}-server`;
  const useTurn = v.turn.urls.length > 0;

  const podSecurity: IPodSecurityContext = { runAsNonRoot: true, runAsUser: RUN_AS_USER, runAsGroup: RUN_AS_USER, fsGroup: RUN_AS_USER, seccompProfile: { type: 'RuntimeDefault' } };
  const containerSecurity: ISecurityContext = { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } };
  const secretVolume = (name: string, secretName: string): { name: string; secret: ISecretVolumeSource } => ({ name, secret: { secretName, defaultMode: 0o440 } });

  const serverArgs = [
    'server',
    '--host', '0.0.0.0',
    '--port', String(v.server.port),
    '--job', v.job.id,
    '--token-file', `${TOKEN_DIR}/token`,
    '--model', v.job.model,
    '--optimizer', v.job.optimizer,
    '--batch', String(v.job.batch),
    '--epochs', String(v.job.epochs),
    '--min-peers', String(v.job.minPeers),
    '--max-peers', String(v.job.maxPeers),
    '--hp', `elastic=${v.job.elastic}`, `compression=${v.job.fp16 ? 'fp16' : 'none'}`,
  ];
  // The job's data: the server reads it (for the job's hashes, and for tabs); every worker reads its own copy.
  const job = v.job;
  if (job.text !== undefined) serverArgs.push('--text', job.text, ...(job.context !== undefined ? ['--context', String(job.context)] : []));
  if (job.data !== undefined) serverArgs.push('--data', job.data, ...(job.labels !== undefined ? ['--labels', job.labels] : ['--label-column', job.labelColumn!]));
  const workerDataArgs = job.text !== undefined ? ['--text', job.text] : job.data !== undefined ? ['--data', job.data, ...(job.labels !== undefined ? ['--labels', job.labels] : [])] : [];
  const dataMounts = v.dataVolume ? [{ name: 'job-data', mountPath: v.dataVolume.mountPath, readOnly: true }] : [];
  const dataVolumes = v.dataVolume
    ? [v.dataVolume.configMap !== undefined ? { name: 'job-data', configMap: { name: v.dataVolume.configMap } } : { name: 'job-data', persistentVolumeClaim: { claimName: v.dataVolume.persistentVolumeClaim!, readOnly: true } }]
    : [];
  for (const url of v.turn.stun) serverArgs.push('--stun', url);
  for (const url of v.turn.urls) serverArgs.push('--turn', url);
  if (useTurn) serverArgs.push('--turn-secret-file', `${TURN_DIR}/secret`);

  const probe = (periodSeconds: number) => ({ httpGet: { path: '/healthz', port: 'http' }, periodSeconds, timeoutSeconds: 2, failureThreshold: 3 });
  const server = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: meta('server', 'server'),
    spec: {
      // One replica: a job's membership lives in the server's memory; a second replica would split the ring.
      replicas: 1,
      strategy: { type: 'Recreate' },
      selector: { matchLabels: labels('server') },
      template: {
        metadata: {
          labels: labels('server'),
          annotations: v.server.prometheus ? { 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(v.server.port), 'prometheus.io/path': '/metrics' } : {},
        },
        spec: {
          securityContext: podSecurity,
          automountServiceAccountToken: false,
          containers: [
            {
              name: 'server',
              image: v.images.server,
              imagePullPolicy: v.images.pullPolicy,
              args: serverArgs,
              ports: [{ name: 'http', containerPort: v.server.port, protocol: 'TCP' }],
              readinessProbe: probe(5),
              livenessProbe: probe(10),
              resources: { requests: v.server.resources, limits: { memory: v.server.resources.memory } },
              securityContext: { ...containerSecurity, readOnlyRootFilesystem: true },
              volumeMounts: [{ name: 'job-token', mountPath: TOKEN_DIR, readOnly: true }, { name: 'tmp', mountPath: '/tmp' }, ...(useTurn ? [{ name: 'turn', mountPath: TURN_DIR, readOnly: true }] : []), ...dataMounts],
            },
          ],
          volumes: [secretVolume('job-token', tokenSecret), { name: 'tmp', emptyDir: {} }, ...(useTurn ? [secretVolume('turn', turnSecret)] : []), ...dataVolumes],
        },
      },
    },
  } satisfies IDeployment;

  const service = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: meta('server', 'server'),
    spec: { selector: labels('server'), ports: [{ name: 'http', port: v.server.port, targetPort: 'http', protocol: 'TCP' }] },
  } satisfies IService;

  const workerArgs = ['worker', '--server', `http://${serverName}.${v.namespace}.svc:${v.server.port}`, '--job', v.job.id, '--token-file', `${TOKEN_DIR}/token`, '--runtime', v.workers.runtime];
  // TCP links: listen on every interface of the pod, and tell the others the pod's own IP to dial.
  const links = v.workers.links;
  const linkArgs = links.enabled ? ['--listen', `0.0.0.0:${links.port}`, '--advertise', '$(POD_IP)', ...(links.tls ? ['--link-tls'] : [])] : [];
  const gpuLimits = v.workers.gpu.enabled ? { [v.workers.gpu.resource]: String(v.workers.gpu.count) } : {};
  const workerPod = (restartPolicy: 'Always' | 'OnFailure'): IPodTemplateSpec => ({
    metadata: { labels: labels('worker') },
    spec: {
      securityContext: podSecurity,
      automountServiceAccountToken: false,
      restartPolicy,
      containers: [
        {
          name: 'worker',
          image: v.images.worker,
          imagePullPolicy: v.images.pullPolicy,
          // The pod's name is the peer's name on the page and in the launcher's lines.
          args: [...workerArgs, ...linkArgs, ...workerDataArgs, '--name', '$(POD_NAME)'],
          ...(links.enabled ? { ports: [{ name: 'links', containerPort: links.port, protocol: 'TCP' }] } : {}),
          env: [
            { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
            ...(links.enabled ? [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }] : []),
            // The GPU variant: the device plugin mounts the host's Vulkan driver; Vulkan needs the graphics capability.
            ...(v.workers.gpu.enabled ? [{ name: 'NVIDIA_DRIVER_CAPABILITIES', value: 'compute,utility,graphics' }] : []),
          ],
          resources: { requests: { ...v.workers.resources, ...gpuLimits }, limits: { memory: v.workers.resources.memory, ...gpuLimits } },
          securityContext: containerSecurity,
          volumeMounts: [{ name: 'job-token', mountPath: TOKEN_DIR, readOnly: true }, ...dataMounts],
        },
      ],
      volumes: [secretVolume('job-token', tokenSecret), ...dataVolumes],
    },
  });

  const workers =
    v.workers.kind === 'StatefulSet'
      ? ({
          apiVersion: 'apps/v1',
          kind: 'StatefulSet',
          metadata: meta('worker', 'worker', { annotations: { 'ringtrain.dev/scale': `kubectl -n ${v.namespace} scale statefulset/${v.name}-worker --replicas=N (N from ${v.job.minPeers} to ${v.job.maxPeers})` } }),
          spec: {
            serviceName: `${v.name}-worker`,
            replicas: v.workers.replicas,
            // Workers are peers, not an ordered quorum: start and stop them all at once.
            podManagementPolicy: 'Parallel',
            selector: { matchLabels: labels('worker') },
            template: workerPod('Always'),
          },
        } satisfies IStatefulSet)
      : ({
          apiVersion: 'batch/v1',
          kind: 'Job',
          metadata: meta('worker', 'worker'),
          spec: {
            completionMode: 'Indexed',
            completions: v.workers.replicas,
            parallelism: v.workers.replicas,
            backoffLimit: v.workers.replicas * 2,
            template: workerPod('OnFailure'),
          },
        } satisfies IJob);

  // The StatefulSet's governing Service: headless, no ports (peers dial each other's pod IPs, relayed by the server, not through it).
  const workerService =
    v.workers.kind === 'StatefulSet' ? [{ apiVersion: 'v1', kind: 'Service', metadata: meta('worker', 'worker'), spec: { clusterIP: 'None', selector: labels('worker') } } satisfies IService] : [];

  // Who may open a TCP link to a worker: this job's workers and its server, nobody else (a stranger
  // that reached the port would still be refused by the link key, but should not reach it at all).
  // A policy that selects the workers denies whatever it does not admit, so WebRTC's UDP (tabs, TURN
  // relays, peers elsewhere) is admitted from anywhere, as before.
  const linkPolicy = links.enabled
    ? [
        {
          apiVersion: 'networking.k8s.io/v1',
          kind: 'NetworkPolicy',
          metadata: meta('worker-links', 'worker'),
          spec: {
            podSelector: { matchLabels: labels('worker') },
            policyTypes: ['Ingress'],
            ingress: [
              { from: [{ podSelector: { matchLabels: labels('worker') } }, { podSelector: { matchLabels: labels('server') } }], ports: [{ protocol: 'TCP', port: links.port }] },
              { ports: [{ protocol: 'UDP' }] },
            ],
          },
        } satisfies INetworkPolicy,
      ]
    : [];

  const ingress = v.ingress.enabled
    ? [
        {
          apiVersion: 'networking.k8s.io/v1',
          kind: 'Ingress',
          metadata: meta('server', 'server', {
            // WebSockets live for the whole run: no proxy timeout should cut them after a minute.
            annotations: { 'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600', 'nginx.ingress.kubernetes.io/proxy-send-timeout': '3600' },
          }),
          spec: {
            ingressClassName: v.ingress.className,
            tls: [{ hosts: [v.ingress.host], secretName: v.ingress.tlsSecret }],
            rules: [{ host: v.ingress.host, http: { paths: [{ path: '/', pathType: 'Prefix', backend: { service: { name: serverName, port: { name: 'http' } } } }] } }],
          },
        } satisfies IIngress,
      ]
    : [];

  const secret = (name: string, data: Record<string, string>) => ({ apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: v.namespace, labels: labels('server') }, type: 'Opaque', stringData: data }) satisfies ISecret;
  const secrets = v.secrets.create ? [secret(tokenSecret, { token: v.secrets.jobToken! }), ...(useTurn ? [secret(turnSecret, { secret: v.secrets.turnSecret! })] : [])] : [];

  return [...secrets, server, service, ...ingress, ...workerService, workers, ...linkPolicy] as K8sObject[];
}

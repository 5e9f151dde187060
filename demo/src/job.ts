/**
 * The job panel: what the server says about the job named in the URL
 * (`?job=…#token=…`): its config, its peers and their progress, polled from
 * `GET /api/jobs/:id` with the job's token (the server shows a job only to
 * its token's holders unless it is public). What it learns it also puts on the page's event bus as
 * the library's own event types (membership, train-step, evaluate), so the
 * ring and the charts draw peers in other tabs and processes through the same
 * path as this tab's own events.
 */
import { type EventBus, now } from '../../src/core/events.ts';
import type { PublicJobInfo } from '../../src/signaling/protocol.ts';
import { jobSettingsSchema } from '../../src/signaling/settings.ts';

export type { PublicJobInfo };
import { h } from './dom.ts';

/** How often the panel asks the server. */
export const POLL_MS = 1000;
/**
 * How often to ask again when the server shows no such job to this page. Slower
 * than the server gives back wrong-token tries (one per 6 s), so a tab with a
 * stale link never locks its own address out of the job.
 */
export const NOT_SHOWN_POLL_MS = 10_000;

export interface JobParams {
  job?: string;
  token?: string;
}

/** The job from the query, the token from the fragment (`#token=…`), or from the query as older links had it. */
export function jobParamsFrom(search: string, hash = ''): JobParams {
  const q = new URLSearchParams(search);
  const f = new URLSearchParams(hash.replace(/^#/, ''));
  return { job: q.get('job') ?? f.get('job') ?? undefined, token: f.get('token') ?? q.get('token') ?? undefined };
}

const TOKEN_KEY = (job: string) => `ringtrain-token:${job}`;

/**
 * Reads the job and token from this tab's address, then takes the token out of
 * the address bar (history.replaceState), so it does not stay in the history,
 * bookmarks, screenshots or a shared link. The fragment form never reaches the
 * server at all (browsers do not send fragments). The tab keeps the token in
 * sessionStorage, so a reload still finds it; other tabs do not see it.
 */
export function takeJobParams(
  loc: { search: string; hash: string; pathname: string } = globalThis.location ?? { search: '', hash: '', pathname: '/' },
  history: Pick<History, 'replaceState' | 'state'> | undefined = globalThis.history,
  storage: Pick<Storage, 'getItem' | 'setItem'> | undefined = globalThis.sessionStorage,
): JobParams {
  const params = jobParamsFrom(loc.search, loc.hash);
  const q = new URLSearchParams(loc.search);
  const f = new URLSearchParams(loc.hash.replace(/^#/, ''));
  if (q.has('token') || f.has('token')) {
    const hadFragmentToken = f.has('token');
    q.delete('token');
    f.delete('token');
    const query = q.toString();
    // A fragment without a token (an anchor like #teach-title) is left exactly as it was.
    const fragment = hadFragmentToken ? f.toString() : loc.hash.replace(/^#/, '');
    history?.replaceState(history.state, '', `${loc.pathname}${query ? `?${query}` : ''}${fragment ? `#${fragment}` : ''}`);
  }
  if (params.job) {
    if (params.token) storage?.setItem(TOKEN_KEY(params.job), params.token);
    else params.token = storage?.getItem(TOKEN_KEY(params.job)) ?? undefined;
  }
  return params;
}

/** A validation loss in nats per character, with its perplexity (e^loss: how many letters the model hesitates between). */
export function lossText(loss: number): string {
  return `${loss.toFixed(3)} (perplexity ${Math.exp(loss).toFixed(2)})`;
}

export interface JobPanel {
  element: HTMLElement;
  /** The rank of this tab once it joined, so its own progress is not echoed back from the server. */
  setSelf(rank: number | undefined): void;
  /** The last info the server gave, if any. */
  latest(): PublicJobInfo | undefined;
  stop(): void;
}

type Fetch = (url: string, init: { headers: Record<string, string> }) => Promise<{ ok: boolean; status: number; json(): Promise<unknown> }>;

export function jobPanel(params: JobParams, bus: EventBus, fetchFn: Fetch = (u, init) => fetch(u, { cache: 'no-store', ...init })): JobPanel {
  const status = h('p', { class: 'job-status', 'data-testid': 'job-status', 'aria-live': 'polite' });
  const peerCount = h('output', { 'data-testid': 'peer-count' }, '—');
  const step = h('output', { 'data-testid': 'step' }, '—');
  const loss = h('output', { 'data-testid': 'loss' }, '—');
  const accuracy = h('output', { 'data-testid': 'accuracy' }, '—');
  const metricLabel = h('span', { class: 'stat-label', 'data-testid': 'metric-label' }, 'Test accuracy');
  const config = h('dl', { class: 'facts' });
  const peersBody = h('tbody', {});
  const element = h(
    'section',
    { class: 'card', 'data-testid': 'job', 'aria-labelledby': 'job-title' },
    h('h2', { id: 'job-title' }, params.job ? `Job ${params.job}` : 'Job'),
    status,
    h(
      'div',
      { class: 'stats' },
      h('div', { class: 'stat' }, h('span', { class: 'stat-label' }, 'Peers'), peerCount),
      h('div', { class: 'stat' }, h('span', { class: 'stat-label' }, 'Step'), step),
      h('div', { class: 'stat' }, h('span', { class: 'stat-label' }, 'Loss'), loss),
      h('div', { class: 'stat' }, metricLabel, accuracy),
    ),
    config,
    h(
      'div',
      { class: 'table-scroll' },
      h(
      'table',
      { class: 'peers', 'data-testid': 'peers' },
      h('caption', {}, 'Peers in ring order'),
      h('thead', {}, h('tr', {}, ...['rank', 'runtime', 'name', 'step', 'loss', 'samples/s', 'share'].map((c) => h('th', { scope: 'col' }, c)))),
      peersBody,
      ),
    ),
  );

  let self: number | undefined;
  let info: PublicJobInfo | undefined;
  let lastEpoch = -1;
  const lastStep = new Map<string, number>();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;

  if (!params.job) {
    status.textContent = 'No job in the address. Open the link that `ringtrain server` or `npm start` prints (it ends in ?job=…#token=…) to watch and join a training run. The teaching mode below works without one.';
    element.dataset.state = 'none';
    return { element, setSelf: () => undefined, latest: () => undefined, stop: () => undefined };
  }
  const jobId = params.job;
  status.textContent = `Asking the server about job ${jobId}…`;

  async function poll(): Promise<void> {
    let next = POLL_MS;
    try {
      // The server shows a job that is not public only to a request bearing its token.
      const res = await fetchFn(`/api/jobs/${encodeURIComponent(jobId)}`, { headers: params.token ? { authorization: `Bearer ${params.token}` } : {} });
      if (res.status === 404 || res.status === 429) next = NOT_SHOWN_POLL_MS;
      if (res.status === 429) throw new Error('the server refused: too many wrong tokens from this address lately');
      if (res.status === 404) {
        throw new Error(`the server shows no job '${jobId}' to this page: check the link (with its #token=…), or start the job first`);
      }
      if (!res.ok) throw new Error(`the server answered ${res.status}`);
      show((await res.json()) as PublicJobInfo);
      element.dataset.state = 'ok';
    } catch (err) {
      element.dataset.state = 'error';
      status.textContent = `Cannot read the job: ${err instanceof Error ? err.message : String(err)}. Retrying…`;
    }
    if (!stopped) timer = setTimeout(() => void poll(), next);
  }

  function show(j: PublicJobInfo): void {
    info = j;
    const t = now();
    status.textContent = j.ready
      ? j.started
        ? 'Training.'
        : 'Ready to start.'
      : j.started
        ? `${j.size} peer${j.size === 1 ? '' : 's'} now; the job needs ${j.config.minPeers} to train. The figures below are the last seen.`
        : `Waiting for peers: ${j.size} of at least ${j.config.minPeers}.`;
    peerCount.textContent = String(j.size);
    // Keep the last figures when peers leave, so a finished job still shows how far it got.
    const steps = j.peers.map((p) => p.progress?.step).filter((s): s is number => s !== undefined);
    if (steps.length) step.textContent = String(Math.min(...steps));
    const losses = j.peers.map((p) => p.progress?.loss).filter((l): l is number => l !== undefined);
    if (losses.length) loss.textContent = (losses.reduce((a, b) => a + b, 0) / losses.length).toFixed(4);
    if (j.config.model === 'transformer') {
      // A language model has no accuracy worth showing: its validation loss (nats per character) and perplexity.
      metricLabel.textContent = 'Validation loss';
      const vals = j.peers.map((p) => p.progress?.testLoss).filter((l): l is number => l !== undefined);
      if (vals.length) accuracy.textContent = lossText(Math.min(...vals));
    } else {
      const accs = j.peers.map((p) => p.progress?.testAccuracy).filter((a): a is number => a !== undefined);
      if (accs.length) accuracy.textContent = `${(Math.max(...accs) * 100).toFixed(1)}%`;
    }
    const hp = Object.entries(j.config.hyperparameters).map(([k, v]) => `${k} ${v}`).join(', ');
    // Shown, not trained: a listing this page cannot read (another version's server) still shows its raw settings.
    const settings = jobSettingsSchema.safeParse(j.config.hyperparameters).data ?? {};
    config.replaceChildren(
      h('dt', {}, 'Model'),
      h('dd', {}, `${j.config.model}, ${j.config.optimizer}${hp ? ` (${hp})` : ''}`),
      ...(settings.globalBatch !== undefined
        ? [h('dt', {}, 'Global batch'), h('dd', {}, `${settings.globalBatch} per step, shared ${settings.balance === 'speed' ? 'by speed' : 'equally'}`)]
        : [h('dt', {}, 'Batch per peer'), h('dd', {}, String(j.config.batchPerPeer))]),
      h('dt', {}, 'Peers allowed'),
      h('dd', {}, `${j.config.minPeers} to ${j.config.maxPeers}`),
      h('dt', {}, 'Membership epoch'),
      h('dd', {}, String(j.epoch)),
    );
    peersBody.replaceChildren(
      ...j.peers.map((p) =>
        h(
          'tr',
          { class: p.rank === self ? 'self' : undefined },
          h('td', {}, String(p.rank)),
          h('td', {}, p.runtime),
          h('td', {}, (p.name ?? '') + (p.rank === self ? ' (you)' : '')),
          h('td', {}, p.progress ? String(p.progress.step) : '—'),
          h('td', {}, p.progress?.loss !== undefined ? p.progress.loss.toFixed(4) : '—'),
          h('td', {}, p.progress?.samplesPerS !== undefined ? p.progress.samplesPerS.toFixed(0) : '—'),
          // Examples of each step's global batch this peer takes (they differ with --balance speed).
          h('td', {}, p.progress?.share !== undefined ? String(p.progress.share) : '—'),
        ),
      ),
    );
    if (j.epoch !== lastEpoch) {
      lastEpoch = j.epoch;
      bus.emit({ type: 'membership', t, rank: self ?? -1, size: j.size, epoch: j.epoch, peers: j.peers.map((p) => ({ rank: p.rank, id: p.peerId, runtime: p.runtime })) });
    }
    for (const p of j.peers) {
      const pr = p.progress;
      if (!pr || p.rank === self || lastStep.get(p.peerId) === pr.step) continue;
      lastStep.set(p.peerId, pr.step);
      if (pr.loss !== undefined) {
        bus.emit({ type: 'train-step', t, rank: p.rank, size: j.size, step: pr.step, epoch: pr.epoch ?? 0, loss: pr.loss, samples: 0, samplesPerS: pr.samplesPerS ?? 0, bytesSent: pr.allreduceBytes ?? 0 });
      }
      if (pr.testAccuracy !== undefined) {
        bus.emit({ type: 'evaluate', t, rank: p.rank, step: pr.step, epoch: pr.epoch ?? 0, testAccuracy: pr.testAccuracy, testLoss: pr.testLoss });
      }
    }
  }

  // This tab's own evaluations arrive on the bus at once (the server's copy may come after the peers left).
  bus.on((e) => {
    if (e.type === 'evaluate' && e.rank === self && info?.config.model === 'transformer' && e.testLoss !== undefined) accuracy.textContent = lossText(e.testLoss);
  });
  void poll();
  return {
    element,
    setSelf(rank) {
      self = rank;
      lastEpoch = -1;
    },
    latest: () => info,
    stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
    },
  };
}

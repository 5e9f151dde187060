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
import { hyperparametersSchema } from '../../src/job/settings.ts';
import { settingRowsOf, type SettingRow } from '../../src/job/describe.ts';

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
  loc: { search: string; hash: string; pathname: string } = globalThis.location ?? {
    search: '',
    hash: '',
    pathname: '/',
  },
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
    history?.replaceState(
      history.state,
      '',
      `${loc.pathname}${query ? `?${query}` : ''}${fragment ? `#${fragment}` : ''}`,
    );
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

function accuracyText(a: number): string {
  return `${(a * 100).toFixed(1)}%`;
}

/** What the job is doing, in one sentence; a finished job says so (the server keeps its last report). */
export function statusLine(j: PublicJobInfo): string {
  if (j.finished && j.size === 0) {
    const step = j.finished.progress?.step;
    return `Training finished${step !== undefined ? ` at step ${step}` : ''}. The figures below are its last.`;
  }
  if (j.ready) return j.started ? 'Training.' : 'Ready to start.';
  if (j.started)
    return `${j.size} peer${j.size === 1 ? '' : 's'} now; the job needs ${j.config.minPeers} to train. The figures below are the last seen.`;
  return `Waiting for peers: ${j.size} of at least ${j.config.minPeers}.`;
}

/** The job's settings, one row each: the model, the optimizer, every hyperparameter, the batch and the peers. */
export function settingRows(j: PublicJobInfo): SettingRow[] {
  // Shown, not trained: a listing this page cannot read (another version's server) still shows its raw settings.
  const settings = hyperparametersSchema.safeParse(j.config.hyperparameters).data ?? {};
  const row = (name: string, value: string): SettingRow => ({ key: name, name, value });
  const rows = [
    row('model', j.config.model),
    row('optimizer', j.config.optimizer),
    ...settingRowsOf(j.config.hyperparameters),
  ];
  if (settings.globalBatch !== undefined)
    rows.push(row('shared', settings.balance === 'speed' ? 'by speed' : 'equally'));
  else rows.push(row('batch per peer', String(j.config.batchPerPeer)));
  rows.push(
    row('peers allowed', `${j.config.minPeers} to ${j.config.maxPeers}`),
    row('membership epoch', String(j.epoch)),
  );
  return rows;
}

export interface JobPanel {
  element: HTMLElement;
  /** The rank of this tab once it joined, so its own progress is not echoed back from the server. */
  setSelf(rank: number | undefined): void;
  /** The last info the server gave, if any. */
  latest(): PublicJobInfo | undefined;
  /** Called once when the server says the job finished (a peer left having completed its training), with its last step. */
  onFinished(listener: (step: number | undefined) => void): void;
  stop(): void;
}

type Fetch = (
  url: string,
  init: { headers: Record<string, string> },
) => Promise<{ ok: boolean; status: number; json(): Promise<unknown> }>;

export function jobPanel(
  params: JobParams,
  bus: EventBus,
  fetchFn: Fetch = (u, init) => fetch(u, { cache: 'no-store', ...init }),
): JobPanel {
  const status = h('p', { class: 'job-status', 'data-testid': 'job-status', 'aria-live': 'polite' });
  const peerCount = h('output', { 'data-testid': 'peer-count' }, '—');
  const step = h('output', { 'data-testid': 'step' }, '—');
  const loss = h('output', { 'data-testid': 'loss' }, '—');
  const accuracy = h('output', { 'data-testid': 'accuracy' }, '—');
  const metricLabel = h('span', { class: 'stat-label', 'data-testid': 'metric-label' }, 'Test accuracy');
  const settingsBody = h('tbody', {});
  const config = h(
    'div',
    { class: 'table-scroll' },
    h('table', { class: 'settings', 'data-testid': 'settings' }, h('caption', {}, 'Settings'), settingsBody),
  );
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
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            ...['rank', 'peer', 'step', 'loss', 'samples/s', 'share'].map((c) => h('th', { scope: 'col' }, c)),
          ),
        ),
        peersBody,
      ),
    ),
  );

  let self: number | undefined;
  let info: PublicJobInfo | undefined;
  let lastEpoch = -1;
  const lastStep = new Map<string, number>();
  const lastEvaluation = new Map<string, string>();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  let finishedLine: string | undefined;
  const finishedListeners: ((step: number | undefined) => void)[] = [];

  if (!params.job) {
    status.textContent =
      'No job in the address. Open the link that `ringtrain server` or `npm start` prints (it ends in ?job=…#token=…) to watch and join a training run. The teaching mode below works without one.';
    element.dataset.state = 'none';
    return {
      element,
      setSelf: () => undefined,
      latest: () => undefined,
      onFinished: () => undefined,
      stop: () => undefined,
    };
  }
  const jobId = params.job;
  status.textContent = `Asking the server about job ${jobId}…`;

  async function poll(): Promise<void> {
    let next = POLL_MS;
    try {
      // The server shows a job that is not public only to a request bearing its token.
      const res = await fetchFn(`/api/jobs/${encodeURIComponent(jobId)}`, {
        headers: params.token ? { authorization: `Bearer ${params.token}` } : {},
      });
      if (res.status === 404 || res.status === 429) next = NOT_SHOWN_POLL_MS;
      if (res.status === 429) throw new Error('the server refused: too many wrong tokens from this address lately');
      if (res.status === 404) {
        throw new Error(
          `the server shows no job '${jobId}' to this page: check the link (with its #token=…), or start the job first`,
        );
      }
      if (!res.ok) throw new Error(`the server answered ${res.status}`);
      show((await res.json()) as PublicJobInfo);
      element.dataset.state = finishedLine ? 'finished' : 'ok';
    } catch (err) {
      element.dataset.state = 'error';
      status.textContent = `Cannot read the job: ${err instanceof Error ? err.message : String(err)}. Retrying…`;
    }
    if (!stopped) timer = setTimeout(() => void poll(), next);
  }

  function show(j: PublicJobInfo): void {
    info = j;
    const t = now();
    const done = j.finished?.progress;
    status.textContent = statusLine(j);
    peerCount.textContent = String(j.size);
    // Keep the last figures when peers leave, so a finished job still shows how far it got.
    const progress = [...j.peers.map((p) => p.progress), ...(j.size === 0 && done ? [done] : [])];
    const steps = progress.map((p) => p?.step).filter((s): s is number => s !== undefined);
    if (steps.length) step.textContent = String(Math.min(...steps));
    const losses = progress.map((p) => p?.loss).filter((l): l is number => l !== undefined);
    if (losses.length) loss.textContent = (losses.reduce((a, b) => a + b, 0) / losses.length).toFixed(4);
    if (j.config.model === 'transformer') {
      // A language model has no accuracy worth showing: its validation loss (nats per character) and perplexity.
      metricLabel.textContent = 'Validation loss';
      const vals = progress.map((p) => p?.testLoss).filter((l): l is number => l !== undefined);
      if (vals.length) accuracy.textContent = lossText(Math.min(...vals));
    } else {
      const accs = progress.map((p) => p?.testAccuracy).filter((a): a is number => a !== undefined);
      if (accs.length) accuracy.textContent = accuracyText(Math.max(...accs));
    }
    settingsBody.replaceChildren(
      ...settingRows(j).map((r) =>
        h(
          'tr',
          {},
          h('th', { scope: 'row', ...(r.help ? { title: r.help } : {}) }, r.name),
          h('td', r.unit ? { title: r.unit } : {}, r.value),
        ),
      ),
    );
    if (j.finished && j.size === 0 && !finishedLine) {
      finishedLine = status.textContent;
      for (const l of finishedListeners) l(done?.step);
    }
    if (!j.finished) finishedLine = undefined;
    peersBody.replaceChildren(
      ...j.peers.map((p) =>
        h(
          'tr',
          { class: p.rank === self ? 'self' : undefined },
          h('td', {}, String(p.rank)),
          // Name and runtime in one cell, the only one that wraps: the job column is narrow.
          h(
            'td',
            { class: 'peer-cell' },
            p.name ?? p.peerId.slice(0, 8),
            h('span', { class: 'peer-runtime' }, `${p.rank === self ? 'you, ' : ''}${p.runtime}`),
          ),
          h('td', {}, p.progress ? String(p.progress.step) : '—'),
          // Three decimals: the column is narrow, and the stat above gives four.
          h('td', {}, p.progress?.loss !== undefined ? p.progress.loss.toFixed(3) : '—'),
          h('td', {}, p.progress?.samplesPerS !== undefined ? p.progress.samplesPerS.toFixed(0) : '—'),
          // Examples of each step's global batch this peer takes (they differ with --balance speed).
          h('td', {}, p.progress?.share !== undefined ? String(p.progress.share) : '—'),
        ),
      ),
    );
    if (j.epoch !== lastEpoch) {
      lastEpoch = j.epoch;
      bus.emit({
        type: 'membership',
        t,
        rank: self ?? -1,
        size: j.size,
        epoch: j.epoch,
        peers: j.peers.map((p) => ({ rank: p.rank, id: p.peerId, runtime: p.runtime })),
      });
    }
    for (const p of j.peers) {
      const pr = p.progress;
      if (!pr || p.rank === self || lastStep.get(p.peerId) === pr.step) continue;
      lastStep.set(p.peerId, pr.step);
      if (pr.loss !== undefined) {
        bus.emit({
          type: 'train-step',
          t,
          rank: p.rank,
          size: j.size,
          step: pr.step,
          epoch: pr.epoch ?? 0,
          loss: pr.loss,
          samples: 0,
          samplesPerS: pr.samplesPerS ?? 0,
          bytesSent: pr.allreduceBytes ?? 0,
        });
      }
      // The server keeps a peer's last evaluation beside its later steps: a new evaluation is a new figure.
      const evaluation = `${pr.testAccuracy}/${pr.testLoss}`;
      if (pr.testAccuracy !== undefined && lastEvaluation.get(p.peerId) !== evaluation) {
        lastEvaluation.set(p.peerId, evaluation);
        bus.emit({
          type: 'evaluate',
          t,
          rank: p.rank,
          step: pr.step,
          epoch: pr.epoch ?? 0,
          testAccuracy: pr.testAccuracy,
          testLoss: pr.testLoss,
        });
      }
    }
  }

  // Evaluations arrive on the bus at once (this tab's own, and the server's copies of the others'):
  // the figure beside the chart is the chart's last point.
  bus.on((e) => {
    if (e.type !== 'evaluate') return;
    if (info?.config.model === 'transformer') {
      if (e.rank === self && e.testLoss !== undefined) accuracy.textContent = lossText(e.testLoss);
    } else if (Number.isFinite(e.testAccuracy)) accuracy.textContent = accuracyText(e.testAccuracy);
  });
  void poll();
  return {
    element,
    setSelf(rank) {
      self = rank;
      lastEpoch = -1;
    },
    latest: () => info,
    onFinished(l) {
      finishedListeners.push(l);
      if (finishedLine) l(info?.finished?.progress?.step);
    },
    stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
    },
  };
}

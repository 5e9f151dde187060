/**
 * Join / Leave and this tab's own contribution (steps, samples/s, bytes sent),
 * read from the train-step events this tab's rank emits. Joining is done by a
 * `join` function handed in by the page; without one (no job in the URL, no
 * GPU, or a build without the browser join) the button stays disabled and its
 * tooltip says why.
 */
import type { EventBus } from '../../src/core/events.ts';
import { h } from './dom.ts';

/** A running membership of this tab in the job. */
export interface Joined {
  rank: number;
  size?: number;
  /** Settles when training ends by itself: a line saying how it ended. */
  finished?: Promise<string>;
  /** Leave cleanly: the other peers see this rank go. */
  leave(): Promise<void>;
}

/** Joins the job; `progress` takes short lines saying what is happening meanwhile. */
export type JoinFn = (progress: (line: string) => void) => Promise<Joined>;

export interface ParticipatePanel {
  element: HTMLElement;
  /** Enable Join with this function, or keep it disabled with `why` as the reason. */
  enable(join: JoinFn | null, why?: string): void;
  /** Called with the membership after Join, and with null after Leave. */
  onJoined(listener: (joined: Joined | null) => void): void;
  /** The job is over: Join stays disabled, saying so (a finished job has no ring to join). */
  jobFinished(line: string): void;
}

function formatBytes(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(0)} kB`;
  return `${n} B`;
}

export function participatePanel(bus: EventBus): ParticipatePanel {
  const join = h(
    'button',
    { type: 'button', class: 'primary', 'data-testid': 'join', disabled: true },
    'Join the training',
  );
  const leave = h('button', { type: 'button', 'data-testid': 'leave', disabled: true, title: 'Join first' }, 'Leave');
  const note = h('p', { class: 'join-note', 'data-testid': 'join-note', 'aria-live': 'polite' });
  const steps = h('output', { 'data-testid': 'own-steps' }, '0');
  const rate = h('output', { 'data-testid': 'own-samples' }, '—');
  const sent = h('output', { 'data-testid': 'own-bytes' }, '—');
  const element = h(
    'section',
    { class: 'card', 'data-testid': 'participate', 'aria-labelledby': 'participate-title' },
    h('h2', { id: 'participate-title' }, 'Lend this GPU'),
    h(
      'p',
      { class: 'intro' },
      'Join to make this tab a peer in the ring: it trains on its share of the data with its own GPU and averages gradients with the others.',
    ),
    h('div', { class: 'controls' }, join, leave),
    note,
    h(
      'div',
      { class: 'stats' },
      h('div', { class: 'stat' }, h('span', { class: 'stat-label' }, 'My steps'), steps),
      h('div', { class: 'stat' }, h('span', { class: 'stat-label' }, 'Samples/s'), rate),
      h('div', { class: 'stat' }, h('span', { class: 'stat-label' }, 'Bytes sent'), sent),
    ),
  );

  let joinFn: JoinFn | null = null;
  let current: Joined | null = null;
  let over: string | undefined;
  /** Join is clickable only with a way to join, outside a membership, in a job that is not over. */
  const refreshJoin = () => {
    join.disabled = !joinFn || current !== null || over !== undefined;
    if (over !== undefined) join.title = over;
  };
  const joinListeners: ((j: Joined | null) => void)[] = [];
  const announce = (j: Joined | null) => joinListeners.forEach((l) => l(j));

  bus.on((e) => {
    if (e.type !== 'train-step' || !current || e.rank !== current.rank) return;
    steps.textContent = String(e.step);
    rate.textContent = e.samplesPerS.toFixed(0);
    sent.textContent = formatBytes(e.bytesSent);
  });

  join.addEventListener('click', async () => {
    if (!joinFn || current) return;
    join.disabled = true;
    note.textContent = 'Joining: connecting to the other peers…';
    try {
      const joined = await joinFn((line) => (note.textContent = line));
      current = joined;
      element.dataset.state = 'joined';
      element.dataset.rank = String(joined.rank);
      note.textContent = `Joined as rank ${joined.rank}${joined.size ? ` of ${joined.size}` : ''}: training. Closing this tab counts as leaving.`;
      leave.disabled = false;
      leave.removeAttribute('title');
      announce(joined);
      joined.finished?.then(
        (line) => end(joined, 'finished', line),
        (err: unknown) => end(joined, 'error', `Training failed: ${err instanceof Error ? err.message : String(err)}`),
      );
    } catch (err) {
      element.dataset.state = 'error';
      note.textContent = `Could not join: ${err instanceof Error ? err.message : String(err)}`;
      refreshJoin();
    }
  });
  /** Training ended by itself (or failed): back to not joined, saying why. */
  function end(joined: Joined, state: string, line: string): void {
    if (current !== joined) return;
    current = null;
    element.dataset.state = state;
    note.textContent = line;
    leave.disabled = true;
    // Training that ended by itself ended for the whole job: there is nothing left to join.
    if (state === 'finished') over ??= 'The job has finished.';
    refreshJoin();
    announce(null);
  }

  leave.addEventListener('click', async () => {
    if (!current) return;
    leave.disabled = true;
    const was = current;
    current = null;
    await was.leave().catch(() => undefined);
    element.dataset.state = 'left';
    note.textContent = over ?? 'Left the job. Join again to lend this GPU once more.';
    refreshJoin();
    announce(null);
  });
  // Closing the tab is leaving; the server also notices the socket close, this only makes it prompt.
  globalThis.addEventListener?.('pagehide', () => void current?.leave());

  return {
    element,
    enable(fn, why) {
      joinFn = fn;
      if (fn) join.removeAttribute('title');
      else join.title = why ?? 'Joining is not available here';
      refreshJoin();
      if (!fn && why && over === undefined) note.textContent = why;
    },
    jobFinished(line) {
      over = line;
      refreshJoin();
      // This tab's own end says more (its steps); a watching tab says the job's.
      if (current === null && element.dataset.state !== 'finished') {
        element.dataset.state = 'finished';
        note.textContent = line;
      }
    },
    onJoined(l) {
      joinListeners.push(l);
    },
  };
}

/**
 * The live ring panel: folds every RingEvent on the page's bus into a
 * RingModel and redraws the SVG a few times a second while anything moves.
 * Chunks glide from sender to receiver; link colour and label say which phase
 * and how many bytes per second; stalled and departed peers are marked.
 */
import { type EventBus, now } from '../../../src/core/events.ts';
import { h, svgElement } from '../dom.ts';
import { type ChunkInFlight, formatRate, IN_FLIGHT_MAX_MS, RingModel, type RingSnapshot } from './model.ts';
import { drawRing, type RingDrawing } from './svg.ts';

const PHASE_TAG: Partial<Record<string, string>> = { 'reduce-scatter': 'RS ', allgather: 'AG ' };

/** Redraws per second while chunks move; a software-rendered page has little CPU to spare. */
const FPS = 12;

/** Shown until the first report of the job this page watches arrives (the job panel polls about once a second). */
export const WAITING_FOR_JOB = 'Waiting for the job’s first report…';

/**
 * One chunk per link, the latest sent: a step of a model with many gradient buckets puts a dozen
 * chunks on each link at once, whose labels would pile up on one another.
 */
export function latestPerLink(inFlight: readonly ChunkInFlight[]): { chunk: ChunkInFlight; others: number }[] {
  const byLink = new Map<string, { chunk: ChunkInFlight; others: number }>();
  for (const c of inFlight) {
    const key = `${c.from}>${c.to}`;
    const seen = byLink.get(key);
    if (!seen) byLink.set(key, { chunk: c, others: 0 });
    else byLink.set(key, { chunk: c.t >= seen.chunk.t ? c : seen.chunk, others: seen.others + 1 });
  }
  return [...byLink.values()];
}

export function toDrawing(s: RingSnapshot, t: number, empty?: string): RingDrawing {
  const stalled = s.peers.filter((p) => p.stalledMs !== undefined && !p.lost).map((p) => p.rank);
  const lost = s.peers.filter((p) => p.lost).map((p) => p.rank);
  const parts = [s.size === 0 && empty ? empty : `${s.size} peer${s.size === 1 ? '' : 's'} in the ring`];
  const busy = s.peers.filter((p) => p.phase === 'reduce-scatter' || p.phase === 'allgather');
  if (busy.length) parts.push(busy.map((p) => `rank ${p.rank} in ${p.phase}`).join(', '));
  if (stalled.length) parts.push(`stalled: rank ${stalled.join(', ')}`);
  if (lost.length) parts.push(`left: rank ${lost.join(', ')}`);
  return {
    size: s.size,
    self: s.self,
    peers: s.peers.map((p) => ({
      rank: p.rank,
      sub: p.runtime,
      stalled: p.stalledMs !== undefined,
      lost: p.lost !== undefined,
    })),
    links: s.links.map((l) => ({
      from: l.from,
      to: l.to,
      phase: l.phase,
      active: l.bytesPerS > 0,
      label: l.bytesPerS > 0 ? formatRate(l.bytesPerS) : undefined,
    })),
    chunks: latestPerLink(s.inFlight).map(({ chunk: c, others }) => ({
      from: c.from,
      to: c.to,
      phase: c.phase,
      progress: Math.min(1, (t - c.t) / IN_FLIGHT_MAX_MS),
      // The phase in words too, not only in colour; how many more are on the same link.
      label: `${PHASE_TAG[c.phase] ?? ''}#${c.chunk}${others > 0 ? ` +${others}` : ''}`,
    })),
    description: parts.join('; '),
    empty,
  };
}

/** Shown when the job this page watches has finished and its peers have left. */
export const JOB_FINISHED = 'The job has finished; its peers have left the ring.';

/**
 * `watchingJob`: this page has a job's link, so an empty ring means "not heard yet", not "nothing
 * to watch"; `finished` says whether that job has finished (then the empty ring says so).
 */
export function liveRingPanel(bus: EventBus, o: { watchingJob?: boolean; finished?: () => boolean } = {}): HTMLElement {
  const model = new RingModel();
  const svg = svgElement({ class: 'ring-svg', 'data-testid': 'ring-svg' });
  // Not a live region: it changes several times a second while training, which would drown a screen reader.
  const summary = h('p', { class: 'ring-summary', 'data-testid': 'ring-summary' });
  const section = h(
    'section',
    { class: 'card', 'data-testid': 'ring', 'aria-labelledby': 'ring-title' },
    h('h2', { id: 'ring-title' }, 'The ring'),
    h(
      'p',
      { class: 'intro' },
      'Each peer sends to its right-hand neighbour. Gradients are averaged in two phases: reduce-scatter (chunks are added up on their way round) and allgather (the summed chunks are passed on until every peer has them all).',
    ),
    h(
      'figure',
      {},
      svg,
      h(
        'figcaption',
        {},
        h(
          'span',
          { class: 'legend' },
          h('span', { class: 'swatch ph-rs' }),
          ' RS: reduce-scatter ',
          h('span', { class: 'swatch ph-ag' }),
          ' AG: allgather ',
          h('span', { class: 'swatch stalled' }),
          ' stalled peer',
        ),
      ),
    ),
    summary,
  );

  let dirty = true;
  let timer: ReturnType<typeof setTimeout> | undefined;
  function frame(): void {
    timer = undefined;
    const t = now();
    const snap = model.snapshot(t);
    const drawing = toDrawing(snap, t, o.finished?.() ? JOB_FINISHED : o.watchingJob ? WAITING_FOR_JOB : undefined);
    drawRing(svg, drawing);
    section.dataset.size = String(snap.size);
    if (summary.textContent !== drawing.description) summary.textContent = drawing.description;
    // Keep animating while chunks fly or links still show recent throughput.
    const busy = snap.inFlight.length > 0 || snap.links.some((l) => l.bytesPerS > 0);
    if (busy || dirty) schedule();
    dirty = false;
  }
  function schedule(): void {
    if (timer === undefined) timer = setTimeout(frame, 1000 / FPS);
  }
  bus.on((e) => {
    model.apply(e);
    dirty = true;
    schedule();
  });
  frame();
  return section;
}

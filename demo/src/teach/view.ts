/**
 * Teaching mode, the page half: N virtual peers (2-8) run the real ring
 * allreduce (see record.ts); this view replays the recorded events frame by
 * frame with back / play-pause / forward and a speed control. Every chunk on
 * the wire shows its numbers; the last frame shows that every rank holds the
 * same sum.
 */
import { h, svgElement } from '../dom.ts';
import { drawRing, phaseClass, type DrawnChunk } from '../ring/svg.ts';
import {
  allRanksAgree,
  buildFrames,
  chunkSpans,
  elementsSentPerRank,
  type ChunkSpan,
  type TeachFrame,
  type TeachRecording,
} from './frames.ts';

/** Runs the allreduce on `size` virtual peers and hands back what happened. */
export type Recorder = (size: number, seed: number) => Promise<TeachRecording & { outputs: number[][] }>;

const MIN_PEERS = 2;
const MAX_PEERS = 8;
const DEFAULT_PEERS = 4;
/** Milliseconds per frame at speed 1x. */
const BASE_FRAME_MS = 1600;

export function caption(frame: TeachFrame, size: number, last: boolean): string {
  const n = size;
  if (frame.kind === 'start') {
    return `Each of the ${n} peers holds its own vector, cut into ${n} chunks. Goal: every peer ends with the element-wise sum. Step forward to start.`;
  }
  if (frame.kind === 'reduce-scatter') {
    const done =
      frame.step === frame.stepsInPhase
        ? ' Now each peer holds one fully summed chunk (green); the allgather hands them round.'
        : ` After ${n - 1} steps each peer holds one chunk that is fully summed.`;
    return `Reduce-scatter, step ${frame.step} of ${frame.stepsInPhase}: every peer sends one chunk to its right-hand neighbour, which adds it to its own copy.${done}`;
  }
  const tail = last ? ' Done: every peer now holds the whole sum.' : '';
  return `Allgather, step ${frame.step} of ${frame.stepsInPhase}: every peer passes a fully summed chunk to its right-hand neighbour, which overwrites its copy. After ${n - 1} steps every peer has every summed chunk.${tail}`;
}

function chunkOf(spans: ChunkSpan[], index: number): number {
  return spans.find((s) => index >= s.offset && index < s.offset + s.count)?.chunk ?? 0;
}

export function teachingView(record: Recorder): HTMLElement {
  const peersSelect = h('select', { id: 'teach-peers', 'data-testid': 'teach-peers' });
  for (let n = MIN_PEERS; n <= MAX_PEERS; n++)
    peersSelect.append(h('option', { value: n, selected: n === DEFAULT_PEERS }, String(n)));
  const runBtn = h('button', { type: 'button', 'data-testid': 'teach-run' }, 'New numbers');
  const backBtn = h('button', { type: 'button', 'data-testid': 'teach-back', 'aria-label': 'Step back' }, '◀ Back');
  const playBtn = h('button', { type: 'button', 'data-testid': 'teach-play', 'aria-label': 'Play' }, '▶ Play');
  const stepBtn = h('button', { type: 'button', 'data-testid': 'teach-step', 'aria-label': 'Step forward' }, 'Step ▶');
  const speed = h('input', {
    type: 'range',
    id: 'teach-speed',
    min: 0.25,
    max: 4,
    step: 0.25,
    value: 1,
    'data-testid': 'teach-speed',
  });
  const speedOut = h('output', { for: 'teach-speed' }, '1×');
  const position = h('span', { class: 'position', 'data-testid': 'teach-position', 'aria-live': 'polite' });
  const captionEl = h('p', { class: 'caption', 'data-testid': 'teach-caption', 'aria-live': 'polite' });
  const svg = svgElement({ class: 'ring-svg teach-ring', 'data-testid': 'teach-ring' });
  const inputsTable = h('table', { class: 'vectors', 'data-testid': 'teach-inputs' });
  const buffersTable = h('table', { class: 'vectors', 'data-testid': 'teach-buffers' });
  const wire = h('ul', { class: 'wire', 'data-testid': 'teach-wire' });
  const result = h('div', { class: 'result', 'data-testid': 'teach-result', 'aria-live': 'polite' });
  const why = h('p', { class: 'why', 'data-testid': 'teach-why' });

  const root = h(
    'section',
    { class: 'card teach', 'data-testid': 'teach', 'aria-labelledby': 'teach-title' },
    h('h2', { id: 'teach-title' }, 'Teaching mode: ring-allreduce, step by step'),
    h(
      'p',
      { class: 'intro' },
      'Virtual peers inside this tab run the same ring-allreduce code the real peers use, over an in-memory transport, on small whole numbers. Replay what they did (the arrow keys step too).',
    ),
    h(
      'div',
      { class: 'controls', role: 'group', 'aria-label': 'Teaching controls' },
      h('label', { for: 'teach-peers' }, 'Peers '),
      peersSelect,
      runBtn,
      backBtn,
      playBtn,
      stepBtn,
      h('label', { for: 'teach-speed' }, 'Speed '),
      speed,
      speedOut,
      position,
    ),
    captionEl,
    h(
      'div',
      { class: 'teach-grid' },
      h('figure', {}, svg, h('figcaption', {}, legend())),
      h(
        'div',
        {},
        h('h3', {}, 'On the wire in this step'),
        wire,
        h('h3', {}, 'What each peer holds'),
        buffersTable,
        h('h3', {}, 'What each peer started with'),
        inputsTable,
      ),
    ),
    result,
    why,
  );

  let frames: TeachFrame[] = [];
  let rec: (TeachRecording & { outputs: number[][] }) | null = null;
  let spans: ChunkSpan[] = [];
  let at = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;
  let seed = 1;
  /** Only the latest run may show its frames (the user can start another before one ends). */
  let runId = 0;

  const playing = () => timer !== undefined;
  function stop(): void {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
    playBtn.textContent = '▶ Play';
    playBtn.setAttribute('aria-label', 'Play');
  }
  function tick(): void {
    if (at >= frames.length - 1) return stop();
    at++;
    render();
    if (at >= frames.length - 1) return stop();
    timer = setTimeout(tick, BASE_FRAME_MS / Number(speed.value));
  }

  async function run(): Promise<void> {
    stop();
    const size = Number(peersSelect.value);
    root.dataset.state = 'running';
    result.textContent = `Running the allreduce on ${size} virtual peers…`;
    const mine = ++runId;
    try {
      const recorded = await record(size, seed++);
      if (mine !== runId) return;
      rec = recorded;
      frames = buildFrames(rec);
      spans = chunkSpans(rec);
      at = 0;
      root.dataset.state = 'ready';
      render();
    } catch (err) {
      if (mine !== runId) return;
      root.dataset.state = 'error';
      result.textContent = `The allreduce failed: ${err instanceof Error ? err.message : String(err)}`;
    }
  }

  function render(): void {
    if (!rec) return;
    const frame = frames[at];
    const size = rec.size;
    const last = at === frames.length - 1;
    position.textContent = `Step ${at} of ${frames.length - 1}`;
    captionEl.textContent = caption(frame, size, last);
    // A button that disables itself would drop keyboard focus on the floor: hand it to the other one.
    const focused = document.activeElement;
    backBtn.disabled = at === 0;
    stepBtn.disabled = last;
    if (focused === stepBtn && last) backBtn.focus();
    if (focused === backBtn && at === 0) stepBtn.focus();
    playBtn.disabled = last && !playing();
    root.dataset.frame = String(at);
    root.dataset.phase = frame.kind;

    // With many peers the numbers do not fit on the ring; the list beside it has them all.
    const chunks: DrawnChunk[] = frame.transfers.map((t) => ({
      from: t.from,
      to: t.to,
      progress: 0.55,
      phase: frame.kind === 'start' ? 'negotiate' : frame.kind,
      label: size <= 5 ? `#${t.chunk} [${t.values.join(',')}]` : `#${t.chunk}`,
    }));
    drawRing(svg, {
      size,
      peers: Array.from({ length: size }, (_, r) => ({ rank: r })),
      links: Array.from({ length: size }, (_, r) => ({
        from: r,
        to: (r + 1) % size,
        phase: frame.kind === 'start' ? undefined : frame.kind,
      })),
      chunks,
      description: `${size} virtual peers in a ring. ${caption(frame, size, last)}`,
    });

    wire.replaceChildren(
      ...(frame.transfers.length
        ? frame.transfers.map((t) =>
            h(
              'li',
              { class: phaseClass(frame.kind === 'start' ? undefined : frame.kind) },
              `rank ${t.from} → rank ${t.to}: chunk ${t.chunk} = [${t.values.join(', ')}]`,
            ),
          )
        : [h('li', {}, 'nothing yet')]),
    );
    fillTable(buffersTable, frame.buffers, frame.changed, frame.kind, frame.settled);
    fillTable(inputsTable, rec.inputs, undefined, 'start');

    if (last && frames.length > 1) {
      const agree = allRanksAgree(frame);
      const sum = frame.buffers[0];
      const matchesCollective = rec.outputs.every((o) => o.length === sum.length && o.every((x, i) => x === sum[i]));
      result.replaceChildren(
        h('strong', {}, agree ? 'Every rank holds the same sum: ' : 'The ranks disagree: '),
        h('output', { 'data-testid': 'teach-sum' }, sum.join(' ')),
        matchesCollective
          ? ''
          : h(
              'span',
              { class: 'bad' },
              ' (the replay differs from what the allreduce returned: a bug, please report it)',
            ),
      );
      result.dataset.agree = String(agree && matchesCollective);
      const sent = elementsSentPerRank(rec);
      const length = rec.inputs[0]?.length ?? 0;
      why.textContent = `Why a ring: each peer sent ${sent[0]} numbers for a vector of ${length}, that is 2(N−1)/N = ${((2 * (size - 1)) / size).toFixed(2)} times its vector, and received as much. That is almost 2× whatever N is, and every link is busy in every step, so the time depends on one link's bandwidth, not on the number of peers.`;
    } else {
      result.replaceChildren('Not finished: keep stepping forward to reach the sum.');
      delete result.dataset.agree;
      why.textContent = '';
    }
  }

  function fillTable(
    table: HTMLTableElement,
    rows: number[][],
    changed: Set<number>[] | undefined,
    kind: TeachFrame['kind'],
    settled?: Set<number>[],
  ): void {
    const length = rows[0]?.length ?? 0;
    const head = h('tr', {}, h('th', { scope: 'col' }, 'peer'));
    for (const s of spans) head.append(h('th', { scope: 'colgroup', colspan: s.count }, `chunk ${s.chunk}`));
    const body = rows.map((v, r) => {
      const tr = h('tr', { 'data-rank': r }, h('th', { scope: 'row' }, `rank ${r}`));
      for (let i = 0; i < length; i++) {
        const hot = changed?.[r]?.has(i);
        const done = settled?.[r]?.has(i);
        const classes = [
          hot && kind !== 'start' ? `hot ${phaseClass(kind)}` : '',
          done ? 'settled' : '',
          chunkOf(spans, i) % 2 ? 'odd' : '',
        ]
          .filter(Boolean)
          .join(' ');
        tr.append(
          h(
            'td',
            { class: classes || undefined, title: done ? 'final: the sum over all peers' : undefined },
            String(v[i]),
          ),
        );
      }
      return tr;
    });
    table.replaceChildren(h('thead', {}, head), h('tbody', {}, ...body));
  }

  runBtn.addEventListener('click', () => void run());
  peersSelect.addEventListener('change', () => void run());
  backBtn.addEventListener('click', () => {
    stop();
    if (at > 0) at--;
    render();
  });
  stepBtn.addEventListener('click', () => {
    stop();
    if (at < frames.length - 1) at++;
    render();
  });
  playBtn.addEventListener('click', () => {
    if (playing()) return stop();
    playBtn.textContent = '⏸ Pause';
    playBtn.setAttribute('aria-label', 'Pause');
    timer = setTimeout(tick, 0);
  });
  // Arrow keys step while focus is anywhere in the section, except on controls that use them themselves.
  root.addEventListener('keydown', (e) => {
    const target = e.target as HTMLElement;
    if (target === speed || target === peersSelect || e.altKey || e.ctrlKey || e.metaKey) return;
    if (e.key === 'ArrowRight' && !stepBtn.disabled) stepBtn.click();
    else if (e.key === 'ArrowLeft' && !backBtn.disabled) backBtn.click();
    else return;
    e.preventDefault();
  });
  speed.addEventListener('input', () => {
    speedOut.textContent = `${speed.value}×`;
  });
  void run();
  return root;
}

function legend(): HTMLElement {
  return h(
    'span',
    { class: 'legend' },
    h('span', { class: 'swatch ph-rs' }),
    ' reduce-scatter (add) ',
    h('span', { class: 'swatch ph-ag' }),
    ' allgather (copy) ',
    h('span', { class: 'swatch settled' }),
    ' final sum',
  );
}

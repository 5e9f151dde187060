/**
 * Teaching mode, the replay half: turns the RingEvents recorded while the real
 * ring-allreduce ran on N virtual peers into frames a person can step through.
 * One frame is one ring step of one phase (every rank sends one chunk to its
 * right-hand neighbour at once), so a run of N peers has 2(N-1) frames plus
 * the start. Pure data in, data out: no DOM, so it is unit-tested directly.
 */
import type { Phase, RingEvent } from '../../../src/core/events.ts';

type ChunkRecv = Extract<RingEvent, { type: 'chunk-recv' }>;
type ChunkSend = Extract<RingEvent, { type: 'chunk-send' }>;

/** What the recorder hands over: the vectors each rank started with and every event, in emission order. */
export interface TeachRecording {
  size: number;
  inputs: number[][];
  events: RingEvent[];
}

/** One chunk moving along one link during a frame. */
export interface Transfer {
  from: number;
  to: number;
  chunk: number;
  offset: number;
  /** The numbers on the wire. */
  values: number[];
}

export type FrameKind = 'start' | 'reduce-scatter' | 'allgather';

export interface TeachFrame {
  kind: FrameKind;
  /** 1-based ring step within the phase; 0 for the start frame. */
  step: number;
  /** Ring steps in each phase (N-1). */
  stepsInPhase: number;
  transfers: Transfer[];
  /** Every rank's vector after this frame's chunks have arrived. */
  buffers: number[][];
  /** Element indices that changed on each rank in this frame. */
  changed: Set<number>[];
  /** Element indices on each rank that already hold the final result (fully reduced). */
  settled: Set<number>[];
}

/** Where chunk `c` of a vector of `length` elements begins and how long it is, as the ring splits it (from the events). */
export interface ChunkSpan {
  chunk: number;
  offset: number;
  count: number;
}

const PHASE_ORDER: Record<string, number> = { 'reduce-scatter': 0, allgather: 1 };

function isRingPhase(p: Phase): p is 'reduce-scatter' | 'allgather' {
  return p === 'reduce-scatter' || p === 'allgather';
}

/**
 * Builds the frames. The numbers a frame shows come from the events: `result`
 * when the collective reports what the receiver holds after reducing, else the
 * received `values` (added to the receiver's copy in reduce-scatter, copied in
 * allgather, which is what those phases do with a sum).
 */
export function buildFrames(rec: TeachRecording): TeachFrame[] {
  const { size, inputs } = rec;
  const recvs = rec.events.filter(
    (e): e is ChunkRecv => e.type === 'chunk-recv' && isRingPhase(e.phase) && e.rank === e.to,
  );
  const sends = rec.events.filter(
    (e): e is ChunkSend => e.type === 'chunk-send' && isRingPhase(e.phase) && e.rank === e.from,
  );

  // Group by (phase, step); order phases as the algorithm runs them, steps ascending.
  const groups = new Map<string, { phase: 'reduce-scatter' | 'allgather'; step: number; recvs: ChunkRecv[] }>();
  for (const e of recvs) {
    const phase = e.phase as 'reduce-scatter' | 'allgather';
    const key = `${phase}:${e.step}`;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { phase, step: e.step, recvs: [] }));
    g.recvs.push(e);
  }
  const ordered = [...groups.values()].sort((a, b) => PHASE_ORDER[a.phase] - PHASE_ORDER[b.phase] || a.step - b.step);
  const stepsInPhase = Math.max(0, size - 1);

  let buffers = inputs.map((v) => [...v]);
  const frames: TeachFrame[] = [
    {
      kind: 'start',
      step: 0,
      stepsInPhase,
      transfers: [],
      buffers,
      changed: inputs.map(() => new Set<number>()),
      settled: inputs.map(() => new Set<number>()),
    },
  ];
  // A chunk is fully reduced on the rank that receives it in the last reduce-scatter step;
  // from then on the allgather only copies such chunks, so what it delivers is final too.
  const lastReduceStep = Math.max(-Infinity, ...ordered.filter((g) => g.phase === 'reduce-scatter').map((g) => g.step));
  let settled = inputs.map(() => new Set<number>());
  const phaseStepBase = new Map<string, number>();
  for (const g of ordered) {
    // Steps may be numbered from 0 or 1 by the collective; show them 1-based within the phase.
    if (!phaseStepBase.has(g.phase)) phaseStepBase.set(g.phase, g.step);
    const shownStep = g.step - (phaseStepBase.get(g.phase) ?? 0) + 1;
    buffers = buffers.map((v) => [...v]);
    const changed = buffers.map(() => new Set<number>());
    // Segments of one chunk arrive as separate events: apply each, then merge them for display.
    const byLink = new Map<string, Transfer>();
    for (const e of [...g.recvs].sort((a, b) => a.from - b.from || a.offset - b.offset)) {
      const values = e.values ?? valuesFromSend(sends, e);
      const dest = buffers[e.to];
      if (!dest) continue;
      for (let i = 0; i < e.count; i++) {
        const at = e.offset + i;
        const next = e.result
          ? e.result[i]
          : g.phase === 'reduce-scatter'
            ? dest[at] + (values?.[i] ?? 0)
            : (values?.[i] ?? dest[at]);
        dest[at] = next;
        changed[e.to].add(at);
      }
      const key = `${e.from}>${e.to}:${e.chunk}`;
      const t = byLink.get(key);
      if (t) t.values.push(...(values ?? []));
      else byLink.set(key, { from: e.from, to: e.to, chunk: e.chunk, offset: e.offset, values: [...(values ?? [])] });
    }
    settled = settled.map((cells) => new Set(cells));
    if (g.phase === 'allgather' || g.step === lastReduceStep)
      changed.forEach((cells, r) => cells.forEach((i) => settled[r].add(i)));
    frames.push({
      kind: g.phase,
      step: shownStep,
      stepsInPhase,
      transfers: [...byLink.values()].sort((a, b) => a.from - b.from),
      buffers,
      changed,
      settled,
    });
  }
  return frames;
}

function valuesFromSend(sends: ChunkSend[], r: ChunkRecv): number[] | undefined {
  return sends.find(
    (s) =>
      s.id === r.id &&
      s.phase === r.phase &&
      s.step === r.step &&
      s.from === r.from &&
      s.to === r.to &&
      s.offset === r.offset,
  )?.values;
}

/** The chunk spans the ring used, read off the events (chunk index -> offset and total count). */
export function chunkSpans(rec: TeachRecording): ChunkSpan[] {
  const spans = new Map<number, ChunkSpan>();
  for (const e of rec.events) {
    if (e.type !== 'chunk-send' || !isRingPhase(e.phase) || e.rank !== e.from) continue;
    const s = spans.get(e.chunk);
    if (!s) spans.set(e.chunk, { chunk: e.chunk, offset: e.offset, count: e.count });
    else {
      const end = Math.max(s.offset + s.count, e.offset + e.count);
      s.offset = Math.min(s.offset, e.offset);
      s.count = end - s.offset;
    }
  }
  return [...spans.values()].sort((a, b) => a.offset - b.offset);
}

/** Elements each rank put on the wire during the allreduce, from its chunk-send events. */
export function elementsSentPerRank(rec: TeachRecording): number[] {
  const sent = new Array<number>(rec.size).fill(0);
  for (const e of rec.events) {
    if (e.type === 'chunk-send' && isRingPhase(e.phase) && e.rank === e.from && e.from < rec.size)
      sent[e.from] += e.count;
  }
  return sent;
}

/** True when every rank's vector in the frame is the same. */
export function allRanksAgree(frame: TeachFrame): boolean {
  const [first, ...rest] = frame.buffers;
  return first !== undefined && rest.every((v) => v.length === first.length && v.every((x, i) => x === first[i]));
}

/**
 * Draws a ring: peers on a circle, one curved arrow per link (rank r to r+1),
 * chunks as labelled dots along the links. Both the live ring and the teaching
 * mode hand it a RingDrawing built from RingEvents; it knows nothing else.
 */
import type { Phase } from '../../../src/core/events.ts';

const SVG_NS = 'http://www.w3.org/2000/svg';
const VIEW = 420;
const CENTER = VIEW / 2;
const RADIUS = 140;
const PEER_R = 30;
/** Smaller circles from this many peers on, so that short links still show. */
const CROWDED = 6;
const peerRadius = (size: number) => (size >= CROWDED ? 22 : PEER_R);
/** How far a link bows out from the straight chord, so that 0->1 and 1->0 stay apart when N=2. */
const BOW = 38;
/** Distance of a link's rate label from the link. */
const LABEL_GAP = 30;
/** About the width of one character of a link label (12 px text, page.css), to keep it inside the view. */
const LABEL_CHAR_PX = 7;

export interface DrawnPeer {
  rank: number;
  /** Second line under the rank, e.g. the runtime. */
  sub?: string;
  stalled?: boolean;
  lost?: boolean;
}

export interface DrawnLink {
  from: number;
  to: number;
  label?: string;
  phase?: Phase;
  /** Carrying bytes even though its phase is unknown (progress relayed by the server). */
  active?: boolean;
}

export interface DrawnChunk {
  from: number;
  to: number;
  /** 0 at the sender, 1 at the receiver. */
  progress: number;
  phase: Phase;
  label: string;
}

export interface RingDrawing {
  size: number;
  self?: number;
  peers: DrawnPeer[];
  links: DrawnLink[];
  chunks: DrawnChunk[];
  /** Read by screen readers instead of the picture. */
  description: string;
  /** What to say while there is no ring to draw. */
  empty?: string;
}

/** Colour class per phase; the legend in the page uses the same classes. */
export function phaseClass(phase: Phase | undefined): string {
  if (phase === 'reduce-scatter') return 'ph-rs';
  if (phase === 'allgather') return 'ph-ag';
  return phase ? 'ph-other' : 'ph-idle';
}

type Pt = { x: number; y: number };

function peerPos(rank: number, size: number): Pt {
  const a = -Math.PI / 2 + (2 * Math.PI * rank) / Math.max(1, size);
  return { x: CENTER + RADIUS * Math.cos(a), y: CENTER + RADIUS * Math.sin(a) };
}

/** A point `by` beyond peer `rank`'s centre, on the line from the ring's centre through it. */
function outward(rank: number, size: number, by: number): Pt {
  const a = -Math.PI / 2 + (2 * Math.PI * rank) / Math.max(1, size);
  return { x: CENTER + (RADIUS + by) * Math.cos(a), y: CENTER + (RADIUS + by) * Math.sin(a) };
}

/** The link from `from` to `to` as a quadratic curve, trimmed so it starts and ends at the peer circles. */
function linkCurve(from: number, to: number, size: number): { p0: Pt; c: Pt; p1: Pt } {
  const a = peerPos(from, size);
  const b = peerPos(to, size);
  const dx = b.x - a.x;
  const dy = b.y - a.y;
  const len = Math.hypot(dx, dy) || 1;
  // Ranks go clockwise on screen (y points down), so (dy, -dx) points away from the centre: links bulge outwards like a
  // ring.
  const c = { x: (a.x + b.x) / 2 + (dy / len) * BOW, y: (a.y + b.y) / 2 - (dx / len) * BOW };
  const trim = (p: Pt, by: number): Pt => {
    const ux = c.x - p.x;
    const uy = c.y - p.y;
    const l = Math.hypot(ux, uy) || 1;
    return { x: p.x + (ux / l) * by, y: p.y + (uy / l) * by };
  };
  const r = peerRadius(size);
  return { p0: trim(a, r + 2), c, p1: trim(b, r + 8) };
}

function bezier(q: { p0: Pt; c: Pt; p1: Pt }, t: number): Pt {
  const u = 1 - t;
  return {
    x: u * u * q.p0.x + 2 * u * t * q.c.x + t * t * q.p1.x,
    y: u * u * q.p0.y + 2 * u * t * q.c.y + t * t * q.p1.y,
  };
}

function el<K extends keyof SVGElementTagNameMap>(
  name: K,
  attrs: Record<string, string | number>,
  text?: string,
): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Replaces the contents of `svg` with the drawing. */
export function drawRing(svg: SVGSVGElement, d: RingDrawing): void {
  svg.setAttribute('viewBox', `0 0 ${VIEW} ${VIEW}`);
  svg.setAttribute('role', 'img');
  svg.replaceChildren();
  svg.append(el('title', {}, d.description));
  const defs = el('defs', {});
  for (const cls of ['ph-rs', 'ph-ag', 'ph-other', 'ph-idle']) {
    const marker = el('marker', {
      id: `arrow-${cls}`,
      viewBox: '0 0 10 10',
      refX: 2,
      refY: 5,
      markerWidth: 5,
      markerHeight: 5,
      orient: 'auto-start-reverse',
    });
    marker.append(el('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: `arrowhead ${cls}` }));
    defs.append(marker);
  }
  svg.append(defs);
  if (d.size === 0) {
    // A short strip instead of an empty circle's worth of space.
    svg.setAttribute('viewBox', `0 0 ${VIEW} 60`);
    svg.append(
      el(
        'text',
        { x: CENTER, y: 34, class: 'ring-empty', 'text-anchor': 'middle' },
        d.empty ?? 'No peers yet: open a job’s link to watch its ring.',
      ),
    );
    return;
  }
  if (d.size > 1) {
    for (const link of d.links) {
      const q = linkCurve(link.from, link.to, d.size);
      const cls = link.phase === undefined && link.active ? 'ph-other' : phaseClass(link.phase);
      svg.append(
        el('path', {
          d: `M ${q.p0.x} ${q.p0.y} Q ${q.c.x} ${q.c.y} ${q.p1.x} ${q.p1.y}`,
          class: `link ${cls}`,
          'marker-end': `url(#arrow-${cls})`,
        }),
      );
      if (link.label) {
        // Beside the curve, on its outer side, so chunks travelling along it do not cover the rate.
        const m = bezier(q, 0.5);
        const chord = { x: (q.p0.x + q.p1.x) / 2, y: (q.p0.y + q.p1.y) / 2 };
        const len = Math.hypot(q.c.x - chord.x, q.c.y - chord.y) || 1;
        const out = { x: m.x + ((q.c.x - chord.x) / len) * LABEL_GAP, y: m.y + ((q.c.y - chord.y) / len) * LABEL_GAP };
        // Kept inside the picture: at the top and bottom of a ring of 8 the outer side is the edge.
        const half = (LABEL_CHAR_PX * link.label.length) / 2 + 2;
        const x = Math.min(VIEW - half, Math.max(half, out.x));
        const y = Math.min(VIEW - 10, Math.max(10, out.y));
        svg.append(
          el('text', { x, y, class: 'link-label', 'text-anchor': 'middle', 'dominant-baseline': 'middle' }, link.label),
        );
      }
    }
  }
  for (let r = 0; r < d.size; r++) {
    const p = peerPos(r, d.size);
    const peer = d.peers.find((x) => x.rank === r) ?? { rank: r };
    const classes = ['peer', peer.stalled ? 'stalled' : '', peer.lost ? 'lost' : '', d.self === r ? 'self' : '']
      .filter(Boolean)
      .join(' ');
    const g = el('g', { class: classes, 'data-rank': r });
    g.append(el('circle', { cx: p.x, cy: p.y, r: peerRadius(d.size) }));
    const name = d.size >= CROWDED ? String(r) : `rank ${r}`;
    g.append(
      el(
        'text',
        {
          x: p.x,
          y: peer.sub ? p.y - 4 : p.y + 1,
          'text-anchor': 'middle',
          'dominant-baseline': 'middle',
          class: 'peer-name',
        },
        name,
      ),
    );
    if (peer.sub)
      g.append(
        el(
          'text',
          { x: p.x, y: p.y + 12, 'text-anchor': 'middle', 'dominant-baseline': 'middle', class: 'peer-sub' },
          peer.sub,
        ),
      );
    const flag = peer.lost ? 'left' : peer.stalled ? 'stalled' : d.self === r ? 'this tab' : '';
    if (flag) {
      // Outside the ring, away from the links, where the chunks leaving and reaching this peer never pass.
      const out = outward(r, d.size, peerRadius(d.size) + 16);
      g.append(
        el(
          'text',
          { x: out.x, y: out.y, 'text-anchor': 'middle', 'dominant-baseline': 'middle', class: 'peer-flag' },
          flag,
        ),
      );
    }
    svg.append(g);
  }
  for (const c of d.chunks) {
    if (d.size < 2) break;
    const q = linkCurve(c.from, c.to, d.size);
    const p = bezier(q, Math.min(1, Math.max(0, c.progress)));
    const cls = phaseClass(c.phase);
    const g = el('g', { class: `chunk ${cls}` });
    const w = Math.max(24, 7 * c.label.length + 10);
    g.append(el('rect', { x: p.x - w / 2, y: p.y - 10, width: w, height: 20, rx: 6 }));
    g.append(el('text', { x: p.x, y: p.y + 1, 'text-anchor': 'middle', 'dominant-baseline': 'middle' }, c.label));
    svg.append(g);
  }
}

/** init() for Node and Deno: brings the `ws` WebSocket (Node 20 has none) and @roamhq/wrtc. */
import WebSocket from 'ws';
import { loadWrtc } from '../../comm/wrtc.node.ts';
import { detectRuntime } from '../../core/runtime.ts';
import type { WebSocketConstructor } from '../../signaling/client.ts';
import { init as initWith, type InitOptions, type Session } from './session.ts';

export type { InitOptions, Session } from './session.ts';

export function init(o: InitOptions): Promise<Session> {
  const native = (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  const WS =
    o.WebSocket ?? (detectRuntime() === 'deno' && native ? native : (WebSocket as unknown as WebSocketConstructor));
  return initWith({ ...o, WebSocket: WS, wrtc: o.wrtc ?? loadWrtc() });
}

/**
 * connect() for Node, which (at version 20) has no global WebSocket: the `ws`
 * package's WebSocket is injected. Deno and browsers use ./client.ts directly.
 */
import WebSocket from 'ws';
import {
  connect as connectWith,
  type ConnectOptions,
  type SignalingClient,
  type WebSocketConstructor,
} from './client.ts';

export type { ConnectOptions, Membership, SignalingClient } from './client.ts';

export function connect(url: string, options: ConnectOptions): Promise<SignalingClient> {
  return connectWith(url, {
    ...options,
    WebSocket: options.WebSocket ?? (WebSocket as unknown as WebSocketConstructor),
  });
}

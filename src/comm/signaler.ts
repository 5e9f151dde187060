/**
 * How two ranks exchange the WebRTC offer, answer and ICE candidates before a
 * data channel exists. The transport only needs this; who carries the
 * messages (the signaling server, a file store in tests, memory in the page's
 * teaching mode) is somebody else's business.
 *
 * A Signaler is scoped to one membership epoch: ranks are the ranks of that
 * epoch, and signals from another epoch never reach it.
 */
export interface Signaler {
  /** Send a JSON-serialisable signal to `toRank` in this epoch. */
  send(toRank: number, data: unknown): void;
  /** Receive signals addressed to this rank. Returns an unsubscribe function. */
  onSignal(handler: (fromRank: number, data: unknown) => void): () => void;
}

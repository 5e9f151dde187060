/** The transport seam, portable part (Node/Deno-only pieces live in *.node.ts files). */
export type { Communicator, Tag } from './interface.ts';
export type { CommunicatorOptions } from './communicator.ts';
export { LinkCommunicator } from './communicator.ts';
export type { Link } from './link.ts';
export type { Signaler } from './signaler.ts';
export { MAX_MESSAGE_BYTES } from './frame.ts';
export { memoryLinkPair, memoryMesh } from './memory-link.ts';
export { connectMesh, type ConnectOptions } from './webrtc-link.ts';
export { createMemoryRing, joinWebRTCRing, type WebRTCRingOptions } from './rings.ts';
export { MemoryStore, StoreSignaler, type Store } from './store.ts';

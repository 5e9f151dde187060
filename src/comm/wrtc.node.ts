/**
 * The RTCPeerConnection implementation for Node and Deno. Kept in its own
 * Node/Deno-only file so the page never pulls in a native addon.
 */
import wrtc from '@roamhq/wrtc';

export function loadWrtc(): unknown {
  return wrtc;
}

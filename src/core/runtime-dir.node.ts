/**
 * Node and Deno: Vulkan's window-system probe (libwayland) prints
 * `error: XDG_RUNTIME_DIR is invalid or not set in the environment.` twice
 * when the variable is unset, as it is in containers, CI and `sudo` shells.
 * The message is harmless but reads like a failure. An empty private folder
 * is all the probe wants: it is set before the GPU is first asked for, and
 * inherited by every process started after.
 */
import { lstatSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

/** The variable's value, set to a private folder (0700, ours) when it was unset. */
export function ensureRuntimeDir(env: Record<string, string | undefined> = process.env): string {
  if (env.XDG_RUNTIME_DIR) return env.XDG_RUNTIME_DIR;
  const uid = userInfo().uid;
  // One folder per user, reused by every run, so runs leave nothing behind.
  const dir = join(tmpdir(), `ringtrain-runtime-${uid}`);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch {
    // It exists: fine when it is ours and private, as XDG requires.
  }
  const st = lstatSync(dir, { throwIfNoEntry: false });
  // Someone else's folder (or a link) under our name: a fresh one instead.
  const ours = st !== undefined && st.isDirectory() && st.uid === uid && (st.mode & 0o077) === 0;
  env.XDG_RUNTIME_DIR = ours ? dir : mkdtempSync(join(tmpdir(), 'ringtrain-runtime-'));
  return env.XDG_RUNTIME_DIR;
}

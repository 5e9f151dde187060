#!/usr/bin/env node
// The `ringtrain` command under Node: TypeScript sources run through tsx's
// loader, so the repository needs no build step. `--runtime deno` re-executes
// the same CLI under Deno (see src/cli/main.ts).
import { register } from 'tsx/esm/api';
import { writeOpsIndex } from '../scripts/gen-ops-index.mjs';

// The ops barrel is generated from the op folders; a checkout that gained or
// lost an op since `npm ci` would otherwise run with a stale one. It is
// rewritten only when it differs, so a read-only install with a fresh barrel
// writes nothing.
try {
  writeOpsIndex();
} catch (err) {
  console.warn(`ringtrain: could not refresh src/nn/ops/index.ts (${err.message}); using the one on disk`);
}
register();
await import('../src/cli/main.ts');

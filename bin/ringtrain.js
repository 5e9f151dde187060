#!/usr/bin/env node
// The `ringtrain` command under Node. In the repository the TypeScript sources
// run through tsx's loader, with no build step; an installed package has no
// src/ and runs the JavaScript built into dist/ when it was packed.
// `--runtime deno` re-executes the same CLI under Deno (src/cli/host.node.ts).
import { existsSync } from 'node:fs';
import module from 'node:module';

const sources = new URL('../src/cli/main.ts', import.meta.url);

if (existsSync(sources)) {
  // The repository's own scripts (examples/, test/) import 'ringtrain' by name: the
  // `ringtrain-source` export condition resolves that to src/ in this process and in
  // every worker it starts (package.json, "exports").
  const { withSourceConditions } = await import('../scripts/source-conditions.mjs');
  withSourceConditions(process.env);
  module.register('../scripts/source-conditions.mjs', import.meta.url);
  const { writeOpsIndex } = await import('../scripts/gen-ops-index.mjs');
  // The barrels of the ops, optimizers and allreduce algorithms are generated from
  // their folders; a checkout that gained or lost one since `npm ci` would otherwise
  // run with a stale barrel. Each is rewritten only when it differs.
  try {
    writeOpsIndex();
  } catch (err) {
    console.warn(`ringtrain: could not refresh the generated barrels (${err.message}); using the ones on disk`);
  }
  const { register } = await import('tsx/esm/api');
  register();
  await import(sources.href);
} else {
  await import('../dist/src/cli/main.js');
}

#!/usr/bin/env node
// The `ringtrain` command under Node: TypeScript sources run through tsx's
// loader, so the repository needs no build step. `--runtime deno` re-executes
// the same CLI under Deno (see src/cli/main.ts).
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');

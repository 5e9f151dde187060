/**
 * Vitest's global setup (vitest.config.ts): a test run leaves no recovery checkpoint in the
 * repository's root. A worker that ends with an error writes `ringtrain-recovery-step<N>.safetensors`
 * in its working folder (src/cli/commands/recovery.node.ts), and one started from the root by a test that
 * forgot a temporary folder (test/support/cli.ts `ringtrainIn`) or `--recovery` there
 * (test/support/workers.ts `recoveryArgs`) used to leave one beside the sources after a failure.
 * The files that were there before the run are not this run's; any new one fails it, named.
 */
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The recovery checkpoints in the repository's root now. */
export function recoveryFilesInRoot(root = ROOT): string[] {
  return readdirSync(root).filter((name) => name.startsWith('ringtrain-recovery'));
}

/** The names in `after` that are not in `before`, and the message that fails the run for them (null: none). */
export function leftBehind(before: readonly string[], after: readonly string[]): string | null {
  const added = after.filter((name) => !before.includes(name));
  if (added.length === 0) return null;
  return (
    `the test run left ${added.length} recovery checkpoint(s) in the repository's root: ${added.join(', ')}. ` +
    'A test started a worker there that ended with an error: start it in a temporary folder ' +
    '(test/support/cli.ts ringtrainIn) or give it recoveryArgs() (test/support/workers.ts), then delete the files.'
  );
}

export default function setup(): () => void {
  const before = recoveryFilesInRoot();
  return () => {
    const message = leftBehind(before, recoveryFilesInRoot());
    if (message === null) return;
    console.error(`repo-root-guard: ${message}`);
    process.exitCode = 1;
  };
}

/**
 * The chaos CLI (main.ts, bin.js): the `ringtrain` CLI with misbehaviour for tests and
 * benchmarks. The shipped CLI (src/cli/main.ts) never loads this file or
 * faults.ts; they reach the product only through its general extension
 * points (WorkerExtension, RunExtension, setAdapterProbe). Run it as the CLI:
 *
 *   deno run -A test/support/chaos/main.ts worker … --chaos SPEC
 *       this worker misbehaves as SPEC says (faults.ts lists the forms)
 *   node test/support/chaos/bin.js run -np 3 … --chaos-worker I:SPEC
 *       local worker I is started from this entry with --chaos SPEC
 *   … --assume-adapter JSON   (any command)
 *       --runtime auto decides as if the adapter probe had answered JSON
 *       (a machine without the GPU a test wants to see chosen)
 *
 * These flags are taken out of the arguments before the real CLI parses them.
 */
import { fileURLToPath } from 'node:url';
import { argv, currentRuntime, setAdapterProbe, setExitCode } from '../../../src/cli/host.node.ts';
import { runCli } from '../../../src/cli/program.ts';
import { parseAdapterDescription } from '../../../src/cli/runtime-choice.ts';
import { runCommand } from '../../../src/cli/commands/run.ts';
import { workerCommand } from '../../../src/cli/commands/worker.ts';
import { faultHook, lieAfterChecks, parseFault } from './faults.ts';

export const CHAOS_MAIN = fileURLToPath(new URL('./main.ts', import.meta.url));
export const CHAOS_BIN = fileURLToPath(new URL('./bin.js', import.meta.url));

/** Removes `--name VALUE` (or `--name=VALUE`) from `args` and returns VALUE. */
function take(args: string[], name: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === name) return args.splice(i, 2)[1];
    if (args[i].startsWith(`${name}=`)) return args.splice(i, 1)[0].slice(name.length + 1);
  }
  return undefined;
}

/** The launcher's command line for a worker, started from this entry with --chaos SPEC. */
export function chaosWorkerCommand(command: string[], spec: string): string[] {
  const entry = command.map((a) =>
    a.endsWith('src/cli/main.ts') ? CHAOS_MAIN : a.endsWith('bin/ringtrain.js') ? CHAOS_BIN : a,
  );
  if (entry.every((a, i) => a === command[i]))
    throw new Error(`chaos: cannot find the CLI's entry in ${JSON.stringify(command)}`);
  return [...entry, '--chaos', spec];
}

export async function chaosMain(given: readonly string[]): Promise<number> {
  const args = [...given];
  let replace: Parameters<typeof runCli>[1];
  try {
    replace = chaosCommands(args);
  } catch (err) {
    // As the CLI reports a bad option: one line, exit 1.
    process.stderr.write(`ringtrain (chaos): ${(err as Error).message}\n`);
    return 1;
  }
  return runCli(args, replace);
}

/** Takes the chaos flags out of `args` (in place) and returns the subcommands they replace. */
function chaosCommands(args: string[]): Parameters<typeof runCli>[1] {
  const chaos = take(args, '--chaos');
  const chaosWorker = take(args, '--chaos-worker');
  const adapter = take(args, '--assume-adapter');
  if (adapter !== undefined) {
    const description = parseAdapterDescription(adapter, '--assume-adapter');
    setAdapterProbe(async () => description);
  }
  const replace: NonNullable<Parameters<typeof runCli>[1]> = {};
  if (chaos !== undefined) {
    const fault = parseFault(chaos);
    // The hooks live in this process: a worker that re-executed itself under the other runtime would lose them.
    if (!args.some((a) => a === '--runtime' || a.startsWith('--runtime='))) args.push('--runtime', currentRuntime());
    replace.worker = () =>
      workerCommand({
        trainHooks: ({ comm, say }) => ({
          transformGradients: faultHook(fault, comm, say),
          transformContribution: (grads, step) => lieAfterChecks(fault, grads, step),
        }),
      });
  }
  if (chaosWorker !== undefined) {
    const m = /^(\d+):(.+)$/.exec(chaosWorker);
    if (!m)
      throw new Error(
        `--chaos-worker takes INDEX:SPEC (like 2:forge-abort@step:3), got ${JSON.stringify(chaosWorker)}`,
      );
    const index = Number(m[1]);
    parseFault(m[2]); // a bad spec stops the launch here, not in a worker
    replace.run = () =>
      runCommand({ workerCommand: (i, command) => (i === index ? chaosWorkerCommand(command, m[2]) : command) });
  }
  return replace;
}

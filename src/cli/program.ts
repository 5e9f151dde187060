/**
 * The `ringtrain` command line: one commander program with one subcommand per
 * file. To add a subcommand, write `src/cli/commands/<name>.ts` exporting a function
 * that returns a commander `Command`, and add it to SUBCOMMANDS below.
 */
import { Command, CommanderError } from 'commander';
import { isRingtrainError } from '../core/errors.ts';
import { packageVersion } from '../core/package-root.node.ts';
import { stderr } from './host.node.ts';
import { commandStatus } from './status.ts';

type MakeCommand = () => Command;

/**
 * The subcommands by name, in the order help lists them. Each module is imported only when its command is
 * built: a process that runs one command loads that command's modules, not all eleven's (every worker a
 * launcher or a test starts pays for its imports, and `train` alone is about half of what all of them load).
 */
const SUBCOMMANDS = new Map<string, () => Promise<MakeCommand>>([
  ['train', async () => (await import('./commands/train.ts')).trainCommand],
  ['server', async () => (await import('./commands/server.ts')).serverCommand],
  ['worker', async () => (await import('./commands/worker.ts')).workerCommand],
  ['run', async () => (await import('./commands/run.ts')).runCommand],
  ['launch', async () => (await import('./commands/launch.ts')).launchCommand],
  ['bench', async () => (await import('./commands/bench.ts')).benchCommand],
  ['generate', async () => (await import('./commands/generate.ts')).generateCommand],
  ['export', async () => (await import('./commands/export.ts')).exportCommand],
  ['predict', async () => (await import('./commands/predict.ts')).predictCommand],
  ['k8s', async () => (await import('./commands/k8s.node.ts')).k8sCommand],
  ['simulate', async () => (await import('./commands/simulate.node.ts')).simulateCommand],
]);

/**
 * The subcommands to build for `args`: the one they name (its name is the first argument that is not a
 * top-level flag), or every one when they name none (help, --version, or a name commander must refuse
 * and suggest a near one for).
 */
function subcommandsFor(args: readonly string[] | undefined): string[] {
  const name = args?.find((a) => !a.startsWith('-'));
  return name !== undefined && SUBCOMMANDS.has(name) ? [name] : [...SUBCOMMANDS.keys()];
}

/**
 * `replace`: subcommands by name, for a program that embeds this CLI with its
 * own version of one (built the same way, from code); the shipped CLI passes none.
 * `args`: the arguments the program will parse, to build only the subcommand they run (all without them).
 */
export async function buildProgram(
  replace: Record<string, MakeCommand> = {},
  args?: readonly string[],
): Promise<Command> {
  const unknown = Object.keys(replace).filter((name) => !SUBCOMMANDS.has(name));
  if (unknown.length > 0) throw new Error(`buildProgram: no subcommand named ${unknown.join(', ')} to replace`);
  const program = new Command('ringtrain')
    .description(
      'Data-parallel training with WGSL kernels on WebGPU and ring-allreduce over WebRTC, in browsers, Deno and Node.',
    )
    .version(packageVersion(), '-V, --version', 'print the version of ringtrain')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  const names = subcommandsFor(args);
  // Imported side by side: the module loader resolves their graphs together.
  const makers = await Promise.all(
    names.map((name) => (Object.hasOwn(replace, name) ? replace[name] : SUBCOMMANDS.get(name)!())),
  );
  for (const make of makers) program.addCommand(make().exitOverride());
  return program;
}

/** Parses `args` (without the executable and script), runs the subcommand, and returns the exit code. */
export async function runCli(args: readonly string[], replace: Record<string, MakeCommand> = {}): Promise<number> {
  const program = await buildProgram(replace, args);
  commandStatus.exitCode = 0;
  commandStatus.args = args;
  try {
    // horovodrun spells it `-np 4`; commander's short flags are one letter, so accept the Horovod spelling here.
    await program.parseAsync(
      args.map((a) => (a === '-np' ? '--np' : a)),
      { from: 'user' },
    );
    return commandStatus.exitCode;
  } catch (err) {
    // commander has already printed its own message (unknown option, --help…).
    if (err instanceof CommanderError) return err.exitCode;
    if (isRingtrainError(err)) {
      stderr.write(`ringtrain: ${err.message} [${err.code}]\n`);
      return 1;
    }
    stderr.write(`ringtrain: unexpected failure: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    return 70;
  }
}

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
import { serverCommand } from './commands/server.ts';
import { trainCommand } from './commands/train.ts';
import { benchCommand } from './commands/bench.ts';
import { runCommand } from './commands/run.ts';
import { workerCommand } from './commands/worker.ts';
import { generateCommand } from './commands/generate.ts';
import { exportCommand } from './commands/export.ts';
import { predictCommand } from './commands/predict.ts';
import { launchCommand } from './commands/launch.ts';
import { k8sCommand } from './commands/k8s.node.ts';
import { simulateCommand } from './commands/simulate.node.ts';

const SUBCOMMANDS: (() => Command)[] = [
  trainCommand,
  serverCommand,
  workerCommand,
  runCommand,
  launchCommand,
  benchCommand,
  generateCommand,
  exportCommand,
  predictCommand,
  k8sCommand,
  simulateCommand,
];

/**
 * `replace`: subcommands by name, for a program that embeds this CLI with its
 * own version of one (built the same way, from code); the shipped CLI passes none.
 */
export function buildProgram(replace: Record<string, () => Command> = {}): Command {
  const program = new Command('ringtrain')
    .description(
      'Data-parallel training with WGSL kernels on WebGPU and ring-allreduce over WebRTC, in browsers, Deno and Node.',
    )
    .version(packageVersion(), '-V, --version', 'print the version of ringtrain')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  const given = new Set(Object.keys(replace));
  for (const make of SUBCOMMANDS) {
    const cmd = make();
    const own = replace[cmd.name()];
    given.delete(cmd.name());
    program.addCommand((own ? own() : cmd).exitOverride());
  }
  if (given.size > 0) throw new Error(`buildProgram: no subcommand named ${[...given].join(', ')} to replace`);
  return program;
}

/** Parses `args` (without the executable and script), runs the subcommand, and returns the exit code. */
export async function runCli(args: readonly string[], replace: Record<string, () => Command> = {}): Promise<number> {
  const program = buildProgram(replace);
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

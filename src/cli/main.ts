/**
 * Entry point of the `ringtrain` command, under Node (bin/ringtrain.js loads
 * this through tsx) and under Deno (`deno run -A src/cli/main.ts …`).
 */
import { argv, setExitCode } from './host.node.ts';
import { runCli } from './program.ts';

setExitCode(await runCli(argv));

/** Entry point of the chaos CLI (cli.ts says what it adds), under Deno or through bin.js under Node. */
import { argv, setExitCode } from '../../../src/cli/host.node.ts';
import { chaosMain } from './cli.ts';

setExitCode(await chaosMain(argv));

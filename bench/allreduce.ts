/**
 * `npx tsx bench/allreduce.ts --peers N --bytes SIZE --transport webrtc|memory [--fp16] [--iterations K]`:
 * the same benchmark as `ringtrain bench allreduce` (src/cli/commands/bench-allreduce.node.ts), as a script.
 */
import process from 'node:process';
import { main } from '../src/cli/commands/bench-allreduce.node.ts';

await main(process.argv.slice(2));

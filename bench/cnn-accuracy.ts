/**
 * The CNN's accuracy bar over real WebRTC: `ringtrain run -np 4 --model cnn --epochs 3` with the
 * default recipe must reach 97% on the 2,000 held-out digits (750 ring steps of 32). One JSON line:
 * test_accuracy, steps, train_seconds, the bar and whether it was met; exits 1 when it was not.
 *
 *   sh scripts/in-netns.sh npx tsx bench/cnn-accuracy.ts [--epochs 3]
 *
 * test/launcher/cnn-accuracy.test.ts runs the same command for one epoch.
 */
import { spawnSync } from 'node:child_process';
import process from 'node:process';
import { parseArgs } from 'node:util';

const BAR = 0.97;
const { values } = parseArgs({ options: { epochs: { type: 'string', default: '3' } } });
const bin = new URL('../bin/ringtrain.js', import.meta.url).pathname;
const run = spawnSync(
  process.execPath,
  [bin, 'run', '-np', '4', '--model', 'cnn', '--epochs', values.epochs!, '--json'],
  {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
    maxBuffer: 64 * 1024 * 1024,
  },
);
const last = run.stdout.trim().split('\n').pop() ?? '';
if (run.status !== 0 || !last.startsWith('{')) {
  process.stderr.write(`ringtrain run exited ${run.status}\n`);
  process.exit(1);
}
const r = JSON.parse(last) as { test_accuracy: number; steps: number; train_seconds: number; runtime: string };
const met = r.test_accuracy >= BAR;
process.stdout.write(
  JSON.stringify({
    bench: 'cnn-accuracy',
    epochs: Number(values.epochs),
    steps: r.steps,
    runtime: r.runtime,
    test_accuracy: r.test_accuracy,
    train_seconds: r.train_seconds,
    bar: BAR,
    met,
  }) + '\n',
);
process.exit(met ? 0 : 1);

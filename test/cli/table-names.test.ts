/**
 * A table as a user has one: class names in the label column (iris's
 * `species`), trained with `ringtrain train`, then `ringtrain predict` on the
 * very same file, which prints the names. Bad files are refused with the
 * file's line numbers. A model defined in a training script is used by
 * `predict --model script.ts` without running the script's training; a script
 * that exports no model is refused before it runs.
 * One real `ringtrain` process per command (train, predict) for the wiring; the refusals and the plain-output
 * predict run in-process through the same runCli (they are decided before any GPU or data loop).
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeSafetensors } from '../../src/checkpoint/safetensors.ts';
import { ringtrain, ringtrainInProcess } from '../support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-names-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const SPECIES = ['virginica', 'setosa', 'versicolor']; // not sorted: ids follow the sorted names
/** Three separable classes in 3 features, the label column in the middle: class c puts its mass on feature c. */
function irisLike(rows: number): string {
  const lines = ['f0,f1,species,f2'];
  for (let i = 0; i < rows; i++) {
    const c = i % 3;
    const f = [0, 1, 2].map((j) => ((j === c ? 1 : 0) + ((i * 7 + j * 3) % 10) / 50).toFixed(2));
    lines.push([f[0], f[1], SPECIES[c], f[2]].join(','));
  }
  return lines.join('\n') + '\n';
}

const last = (out: string) => JSON.parse(out.trim().split('\n').pop()!);

describe('class names in a CSV label column', () => {
  it('trains on names, records them, and predict prints them for the training file', async () => {
    const data = join(dir, 'iris.csv');
    writeFileSync(data, irisLike(90));
    const ckpt = join(dir, 'iris.safetensors');
    const train = await ringtrain([
      'train',
      '--data',
      data,
      '--label-column',
      'species',
      '--steps',
      '60',
      '--batch',
      '16',
      '--optimizer',
      'adamw',
      '--lr',
      '0.02',
      '--runtime',
      'node',
      '--save',
      ckpt,
      '--json',
    ]);
    expect(train.code, train.stderr).toBe(0);
    expect(last(train.stdout).test_accuracy).toBeGreaterThan(0.9);
    const meta = decodeSafetensors(
      new Uint8Array(await import('node:fs').then((fs) => fs.readFileSync(ckpt))),
    ).metadata;
    expect(JSON.parse(meta.class_names)).toEqual(['setosa', 'versicolor', 'virginica']);
    expect(meta.label_column).toBe('species');

    // Other names would renumber the classes: a resume on them is refused, naming both sets.
    const renamed = join(dir, 'renamed.csv');
    writeFileSync(renamed, irisLike(90).replaceAll('virginica', 'iris-virginica'));
    const resumed = await ringtrainInProcess([
      'train',
      '--data',
      renamed,
      '--label-column',
      'species',
      '--steps',
      '70',
      '--batch',
      '16',
      '--optimizer',
      'adamw',
      '--lr',
      '0.02',
      '--runtime',
      'node',
      '--resume',
      ckpt,
    ]);
    expect(resumed.code).not.toBe(0);
    expect(resumed.stderr).toContain(
      `${ckpt} was trained on the classes setosa, versicolor, virginica, but this data has the classes iris-virginica, setosa, versicolor`,
    );

    // The training file as it is: its species column is left out by the checkpoint's record.
    const r = await ringtrain(['predict', '--checkpoint', ckpt, '--input', data, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const out = last(r.stdout) as { rows: number; classes: number[]; labels: string[]; class_names: string[] };
    expect(out.rows).toBe(90);
    expect(out.class_names).toEqual(['setosa', 'versicolor', 'virginica']);
    expect(out.labels.map((name, i) => out.class_names[out.classes[i]] === name)).not.toContain(false);
    const right = out.labels.filter((name, i) => name === SPECIES[i % 3]).length;
    expect(right / 90).toBeGreaterThan(0.9);

    // Plain output: one name per row; the column named by --label-column in a file without a header row.
    const bare = join(dir, 'bare.csv');
    writeFileSync(bare, irisLike(6).split('\n').slice(1).join('\n'));
    const plain = await ringtrainInProcess(['predict', '--checkpoint', ckpt, '--input', bare, '--label-column', '2']);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout.trim().split('\n')).toEqual(SPECIES.concat(SPECIES));
    // Without --label-column that file has one column too many and no header naming the labels: it says what to pass.
    const unnamed = await ringtrainInProcess(['predict', '--checkpoint', ckpt, '--input', bare]);
    expect(unnamed.code).not.toBe(0);
    expect(unnamed.stderr).toContain(
      `${bare} has 4 columns, one more than the model reads (3), but no column "species"`,
    );
    const beyond = await ringtrainInProcess(['predict', '--checkpoint', ckpt, '--input', bare, '--label-column', '7']);
    expect(beyond.code).not.toBe(0);
    expect(beyond.stderr).toContain('--label-column 7: column 7 does not exist; ' + bare + ' has 4');
  }, 480_000);

  it('refuses a short row and a missing column with the line numbers of the file', async () => {
    const short = join(dir, 'short.csv');
    writeFileSync(short, 'a,b,label\n0.1,0.2,x\n\n0.3,y\n0.5,0.6,x\n');
    const r = await ringtrainInProcess([
      'train',
      '--data',
      short,
      '--label-column',
      'label',
      '--steps',
      '1',
      '--runtime',
      'node',
    ]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`${short}: row at line 4 has 2 columns, the header has 3`);

    const three = join(dir, 'three.csv');
    writeFileSync(three, irisLike(10));
    const wide = await ringtrainInProcess([
      'train',
      '--data',
      three,
      '--label-column',
      '7',
      '--steps',
      '1',
      '--runtime',
      'node',
    ]);
    expect(wide.code).not.toBe(0);
    expect(wide.stderr).toContain(`--label-column 7: column 7 does not exist; ${three} has 4`);

    const word = join(dir, 'word.csv');
    writeFileSync(word, 'a,b,label\n0.1,0.2,x\n0.3,oops,y\n');
    const nan = await ringtrainInProcess([
      'train',
      '--data',
      word,
      '--label-column',
      'label',
      '--steps',
      '1',
      '--runtime',
      'node',
    ]);
    expect(nan.stderr).toContain(`${word}: line 3, column 1 (b) is "oops", not a finite number`);
  }, 300_000);
});

const ROOT = resolve('.');
/** A training script that keeps its model inside: exported, and trained only when the script is the program. */
const SCRIPT = (save: string, marker: string) => `import { writeFileSync } from 'node:fs';
import process from 'node:process';
import { pathToFileURL } from 'node:url';
import { acquireGpu, createModel, optim, saveSafetensors, type ModelFactory } from '${ROOT}/src/index.node.ts';

export const model: ModelFactory = (nn) => ({ module: new nn.Sequential(new nn.Linear(2, 8), new nn.ReLU(), new nn.Linear(8, 2)), inputShape: [2], classes: 2 });

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  writeFileSync(${JSON.stringify(marker)}, 'trained');
  const gpu = await acquireGpu();
  const net = createModel(gpu, model, { name: 'script-net' });
  const opt = new optim.AdamW(net, { lr: 0.05 });
  const x = new Float32Array([1, 0, 0, 1, 0.9, 0.1, 0.1, 0.9]);
  for (let i = 0; i < 40; i++) {
    await net.forwardBackward(x, [0, 1, 0, 1]);
    opt.step();
  }
  writeFileSync(${JSON.stringify(save)}, await saveSafetensors(net));
  net.destroy();
  gpu.destroy();
}
`;

describe('predict --model SCRIPT', () => {
  it("uses a training script's exported model without running its training", async () => {
    const save = join(dir, 'script.safetensors');
    const marker = join(dir, 'trained.txt');
    const script = join(dir, 'train-script.mts');
    writeFileSync(script, SCRIPT(save, marker));
    const run = spawnSync(process.execPath, ['--import', 'tsx', script], { encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    expect(existsSync(marker)).toBe(true);
    rmSync(marker);

    const input = join(dir, 'two.json');
    writeFileSync(
      input,
      JSON.stringify([
        [1, 0],
        [0, 1],
      ]),
    );
    const r = await ringtrain(['predict', '--checkpoint', save, '--model', script, '--input', input]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n')).toEqual(['0', '1']);
    expect(existsSync(marker)).toBe(false);

    // A script whose model stays inside it is refused before anything in it runs.
    const closed = join(dir, 'closed.ts');
    writeFileSync(
      closed,
      `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(marker)}, 'ran');\n`,
    );
    const refused = await ringtrainInProcess(['predict', '--checkpoint', save, '--model', closed, '--input', input]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('closed.ts exports no model factory');
    expect(refused.stderr).toContain('It was not run');
    expect(existsSync(marker)).toBe(false);
  }, 300_000);
});

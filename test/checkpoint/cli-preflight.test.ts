/**
 * Every command that trains (train, worker, run) checks --save and --resume
 * first: a missing directory, a file holding a later step or a damaged
 * checkpoint stops it at once, before data, GPU, server or ring, and leaves
 * the files as they were. In-process, through the same runCli as the binary.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkpointFromFlat, encodeCheckpoint } from '../../src/checkpoint/checkpoint.ts';
import { saveCheckpoint } from '../../src/checkpoint/file.node.ts';
import { runCli } from '../../src/cli/program.ts';

const dir = mkdtempSync(join(tmpdir(), 'ringtrain-cli-preflight-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const layout = [{ name: 'dense0.weight', shape: [784, 10], offset: 0, length: 7840 }];
const ckptAt = (step: number) =>
  checkpointFromFlat({ model: 'mlp', optimizer: 'sgd', step, layout, params: new Float32Array(7840).fill(0.01) });

async function inProcess(args: string[]): Promise<{ code: number; stderr: string }> {
  const write = process.stderr.write;
  let stderr = '';
  process.stderr.write = ((chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  }) as typeof process.stderr.write;
  try {
    return { code: await runCli(args), stderr };
  } finally {
    process.stderr.write = write;
  }
}

// Nothing listens on port 9 here: a worker that got past its checks would fail differently.
// --runtime node: stay in this process (auto could re-execute under Deno, out of reach of the capture).
const COMMANDS: [string, string[]][] = [
  ['train', ['train', '--steps', '2', '--runtime', 'node']],
  ['worker', ['worker', '--server', 'http://127.0.0.1:9', '--job', 'j', '--token', 't', '--runtime', 'node']],
  ['run', ['run', '-np', '2', '--steps', '2']],
];

describe('checkpoint checks before any work', () => {
  it.each(COMMANDS)('%s: --save into a missing directory fails at once', async (_, cmd) => {
    const target = join(dir, 'no-such-dir', 'm.safetensors');
    const r = await inProcess([...cmd, '--save', target]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /--save .*no-such-dir\/m\.safetensors: the directory .*no-such-dir does not exist; create it \(mkdir -p .*\) or save elsewhere\. Nothing was trained or written\. \[ERR_INVALID_ARGUMENT\]/,
    );
    expect(readdirSync(dir)).not.toContain('no-such-dir');
  });

  it.each(COMMANDS)(
    '%s: --save over a later checkpoint is refused without --overwrite, naming its step',
    async (name, cmd) => {
      const path = join(dir, `later-${name}.safetensors`);
      saveCheckpoint(path, ckptAt(500));
      const before = readFileSync(path);
      const r = await inProcess([...cmd, '--save', path]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        /later-\w+\.safetensors holds a checkpoint of step 500 \(mlp, sgd\); a checkpoint of step 0 would replace it with an earlier one\. Continue from it with --resume .*, or pass --overwrite/,
      );
      expect(readFileSync(path).equals(before)).toBe(true);
    },
  );

  it.each(COMMANDS)('%s: a damaged --resume is refused with the tensor name', async (name, cmd) => {
    const bytes = encodeCheckpoint(ckptAt(7));
    bytes[bytes.length - 100] ^= 0x01; // inside the last tensor's data
    const path = join(dir, `damaged-${name}.safetensors`);
    writeFileSync(path, bytes);
    const r = await inProcess([...cmd, '--resume', path]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /damaged-\w+\.safetensors: tensor 'param\/dense0\.weight' is damaged: its data has CRC-32 [0-9a-f]{8} but [0-9a-f]{8} was recorded.*\[ERR_BAD_CHECKPOINT\]/,
    );
  });
});

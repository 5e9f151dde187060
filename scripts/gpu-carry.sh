#!/bin/sh
# Builds what a GPU machine without Node, npm or network needs to run the GPU
# benchmarks (docs/GPU.md), into DEST (default: .devcarry in the main checkout,
# which the device tool carries): the sources, Node compressed with xz, a
# node_modules pruned to what the benchmarks import (Dawn for linux-x64 only),
# the Vulkan loader debs, PyTorch's reference script, and gpu-bench.sh.
#   sh scripts/gpu-carry.sh [DEST]
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-/work/main/.devcarry}
mkdir -p "$dest/gl"
nm=$(cd "$repo/node_modules" && pwd -P)

# Sources (small, plain tar).
tar -C "$repo" -cf "$dest/rt.tar" src shaders bench bin package.json tsconfig.json

# Node: the binary running this script, xz-compressed once (about 24 MB from 99).
if [ ! -s "$dest/node.xz" ]; then
  xz -9 -T1 -c "$(command -v node)" > "$dest/node.xz.tmp" && mv "$dest/node.xz.tmp" "$dest/node.xz"
fi

# node_modules: what bench/kernels.ts and bench/gpu-step.ts load under Node with --import tsx.
stage=$(mktemp -d)
mkdir -p "$stage/node_modules/webgpu/dist" "$stage/node_modules/@esbuild"
cp -r "$nm/webgpu/index.js" "$nm/webgpu/package.json" "$stage/node_modules/webgpu/"
cp -r "$nm/webgpu/dist/linux-x64" "$stage/node_modules/webgpu/dist/"
cp -r "$nm/tsx" "$nm/commander" "$stage/node_modules/"
# esbuild's JS API plus the one linux-x64 binary (its bin/ copy is the same file).
mkdir -p "$stage/node_modules/esbuild"
cp -r "$nm/esbuild/lib" "$nm/esbuild/package.json" "$stage/node_modules/esbuild/"
cp -r "$nm/@esbuild/linux-x64" "$stage/node_modules/@esbuild/"
for dep in get-tsconfig resolve-pkg-maps; do [ -d "$nm/$dep" ] && cp -r "$nm/$dep" "$stage/node_modules/"; done
find "$stage/node_modules" -name '*.map' -delete
tar -C "$stage" -cJf "$dest/nm.tar.xz" node_modules
rm -rf "$stage"

# The Vulkan loader and libglvnd (the NVIDIA ICD needs both), amd64 debs.
(cd "$dest/gl" && [ -n "$(ls ./*.deb 2>/dev/null)" ] || apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)

cp /work/shared/gpu/torch_ref.py "$dest/torch_ref.py"
cp "$repo/scripts/gpu-bench.sh" "$dest/gpu-bench.sh"
du -sh "$dest"

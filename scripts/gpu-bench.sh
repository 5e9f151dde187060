#!/bin/sh
# Runs on the GPU machine from the root of the checkout that carried .devcarry
# (built by scripts/gpu-carry.sh): unpacks Node, node_modules, the sources and
# the Vulkan loader, then measures, in one go and on one GPU, our matmul
# (chosen variant and the old 64×64 tiles) at 256…4096, the MLP step at batch
# 128 and the CNN at batch 32/256 (loss awaited every step vs read every 10,
# GPU waits per step), and PyTorch's figures for the same work.
# Results: JSON files in $OUT (or ./gpu-out). See docs/GPU.md.
#   sh .devcarry/gpu-bench.sh [carry-dir]
# Knobs (to try the recipe on a CPU adapter): SIZES, SAMPLES, BATCHES, ROUNDS, STEP_ROUNDS.
set -u
carry=$(cd "${1:-.devcarry}" && pwd)
out=${OUT:-$PWD/gpu-out}
work=${WORK:-/tmp/ringtrain-gpu}
mkdir -p "$out" "$work"

if [ "$(id -u)" = 0 ] && ! ldconfig -p | grep -q libvulkan.so.1; then
  for f in "$carry"/gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
python3 - "$carry" "$work" <<'PY'
import lzma, os, shutil, sys, tarfile
carry, work = sys.argv[1], sys.argv[2]
with lzma.open(os.path.join(carry, 'node.xz')) as src, open(os.path.join(work, 'node'), 'wb') as dst:
    shutil.copyfileobj(src, dst)
os.chmod(os.path.join(work, 'node'), 0o755)
with tarfile.open(os.path.join(carry, 'nm.tar.xz')) as t: t.extractall(work)
with tarfile.open(os.path.join(carry, 'rt.tar')) as t: t.extractall(work)
PY
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$icd" ] && export VK_ICD_FILENAMES="${VK_ICD_FILENAMES:-$icd}"
cd "$work"
node="$work/node"
"$node" --version
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | tee "$out/gpu.txt"

echo "== runtime probe (what --runtime auto would see)"
"$node" --import tsx src/cli/probe-adapter.node.ts | tee "$out/probe.json"
echo "== kernels (matmul 256..4096, MLP step)"
timeout 240 "$node" --import tsx bench/kernels.ts --json --no-tfjs --rounds ${ROUNDS:-3} --sizes ${SIZES:-256,512,1024,2048,4096} > "$out/kernels.json"; echo "exit $?"
cat "$out/kernels.json"
echo "== CNN step, batch 32 and 256"
timeout 150 "$node" --import tsx bench/gpu-step.ts --batches ${BATCHES:-32,256} --samples ${SAMPLES:-8000} --rounds ${STEP_ROUNDS:-3} > "$out/step.json"; echo "exit $?"
cat "$out/step.json"
echo "== PyTorch reference"
PYTHONUNBUFFERED=1 timeout 150 python3 "$carry/torch_ref.py" > "$out/torch.json"; echo "exit $?"
cat "$out/torch.json"

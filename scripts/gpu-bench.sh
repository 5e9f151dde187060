#!/bin/sh
# Runs on the GPU machine from the root of the checkout that carried .devcarry
# (built by scripts/gpu-carry.sh): unpacks Node, node_modules, the sources and
# the Vulkan loader, then measures on one GPU, under Node (Dawn):
#   - `ringtrain bench profile` (wall ms per step, CPU ms to encode one, GPU ms
#     per kernel) for the transformer at batch 64/256/1024 (and 256 again timed
#     by replay, to check the timestamps), the CNN at 64/256, the MLP at 128;
#   - PyTorch: torch_ref.py (matmul, MLP step, CNN) and gpt_ref.py (the
#     transformer workload) at GPT_B = 64/256/1024, tokens/s.
# Results in $OUT (default ./gpu-out), seven files: gpu.txt, probe.json,
# profile.jsonl (one JSON line per run) and profile.txt (the same as tables),
# torch.json, gpt.jsonl, matmul.json (bench/kernels.ts at 1024…8192: the chosen
# kernel and both GPU variants); every command's stderr goes to log.txt. With
# rt-before.tar in the carry (gpu-carry.sh --before REV), also ab.jsonl: the
# transformer's tokens/s and the CNN/MLP steps from both trees, interleaved,
# through benchmarks both trees have (bench/transformer.ts, bench/gpu-step.ts).
#   sh .devcarry/gpu-bench.sh [carry-dir]
# Knobs (to try it on a CPU adapter with small sizes): TRANSFORMER_BATCHES,
# CNN_BATCHES, MLP_BATCHES, REPLAY_BATCH (each empty: skip), PROFILE_STEPS,
# PROFILE_ROUNDS, PROFILE_WARMUP, PROFILE_TIMEOUT (s per run), GPT_BATCHES,
# GPT_STEPS, TORCH=0 (skip PyTorch), AB_TRANSFORMER_BATCHES, AB_CNN_BATCHES, AB_MLP_BATCH,
# AB_SAMPLES, AB_STEPS, AB_RUNS, MATMUL_SIZES (empty: skip), MATMUL_GROUP_ROWS (e.g. 4,8: the
# blocked kernel's banded tile orders too), MATMUL_TIMEOUT.
set -u
carry=$(cd "${1:-.devcarry}" && pwd)
out=${OUT:-$PWD/gpu-out}
work=${WORK:-/tmp/ringtrain-gpu}
mkdir -p "$out" "$work"
out=$(cd "$out" && pwd)
log=$out/log.txt
: > "$log"

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
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>>"$log" | tee "$out/gpu.txt"

echo "== runtime probe (what --runtime auto would see)"
timeout 30 "$node" --import tsx src/cli/probe-adapter.node.ts 2>>"$log" | tee "$out/probe.json"

: > "$out/profile.jsonl"
profile() { # MODEL BATCH [extra flags]
  model=$1; batch=$2; shift 2
  echo "== bench profile $model batch $batch $*"
  echo "== bench profile $model batch $batch $*" >> "$log"
  timeout "${PROFILE_TIMEOUT:-50}" "$node" bin/ringtrain.js bench profile --runtime node --json --model "$model" --batch "$batch" \
    --steps "${PROFILE_STEPS:-20}" --rounds "${PROFILE_ROUNDS:-10}" --warmup "${PROFILE_WARMUP:-3}" "$@" 2>>"$log" > "$work/profile.json"
  echo "exit $?"
  cat "$work/profile.json" >> "$out/profile.jsonl"
}
# Largest first: if the machine's time runs out, the figures that matter most are already in $OUT.
for b in $(echo "${TRANSFORMER_BATCHES-1024,256,64}" | tr ',' ' '); do profile transformer "$b"; done
for b in $(echo "${CNN_BATCHES-256,64}" | tr ',' ' '); do profile cnn "$b"; done
for b in $(echo "${MLP_BATCHES-128}" | tr ',' ' '); do profile mlp "$b"; done
[ -n "${REPLAY_BATCH-256}" ] && profile transformer "${REPLAY_BATCH-256}" --method replay
# The same runs as tables, for reading.
python3 - "$out/profile.jsonl" > "$out/profile.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try: p = json.loads(line)
    except ValueError: continue
    print(f"{p['model']} batch {p['batch']} ({p['optimizer']}), {p['runtime']} on {p['adapter']}: step {p['step_ms']:.3f} ms wall, "
          f"encode+submit {p['encode_cpu_ms']:.3f} ms CPU (min {p['encode_cpu_min_ms']:.3f}), kernels {p['kernels_ms']:.3f} ms GPU "
          f"= {100 * p['kernels_over_step']:.1f}% of the step, {p['dispatches']} dispatches ({p['method']}, {p['rounds']} runs each)")
    print(f"  {'kernel':<30} {'disp':>5} {'wg/disp':>13} {'wg/step':>9} {'ms/step':>9} {'share':>6}")
    for k in p['kernels']:
        wg = str(k['workgroups_min']) if k['workgroups_min'] == k['workgroups_max'] else f"{k['workgroups_min']}..{k['workgroups_max']}"
        print(f"  {k['label']:<30} {k['dispatches']:>5} {wg:>13} {k['workgroups']:>9} {k['ms']:>9.4f} {100 * k['share']:>5.1f}%")
    print()
PY
cat "$out/profile.txt"

if [ "${TORCH:-1}" != 0 ]; then
  echo "== PyTorch reference (torch_ref.py)"
  PYTHONUNBUFFERED=1 timeout 90 python3 "$carry/torch_ref.py" 2>>"$log" > "$out/torch.json"; echo "exit $?"
  cat "$out/torch.json"
  echo "== PyTorch transformer (gpt_ref.py), ${GPT_STEPS:-300} steps per batch size"
  : > "$out/gpt.jsonl"
  for b in $(echo "${GPT_BATCHES-64,256,1024}" | tr ',' ' '); do
    echo "== gpt_ref.py GPT_B=$b" >> "$log"
    GPT_B=$b PYTHONUNBUFFERED=1 timeout 45 python3 "$carry/gpt_ref.py" 0 "$carry/words.txt" "${GPT_STEPS:-300}" 2>>"$log" |
      python3 -c "import json, sys
for line in sys.stdin:
    r = json.loads(line); r['batch'] = $b; print(json.dumps(r), flush=True)" | tee -a "$out/gpt.jsonl"
  done
fi
if [ -f "$carry/rt-before.tar" ]; then
  # The same work from an older tree (gpu-carry.sh --before REV), the two trees interleaved, with benchmarks
  # both trees have: the transformer's tokens/s (bench/transformer.ts, ours alone) and the CNN/MLP steps
  # (bench/gpu-step.ts: samples/s and ms per step, loss read every 10 steps).
  echo "== the same work from rt-before.tar and from this tree"
  before=$work/before
  mkdir -p "$before" && tar -C "$before" -xf "$carry/rt-before.tar" && ln -sfn "$work/node_modules" "$before/node_modules"
  : > "$out/ab.jsonl"
  for run in $(seq "${AB_RUNS:-1}"); do
    for b in $(echo "${AB_TRANSFORMER_BATCHES-256,1024}" | tr ',' ' '); do
      for tree in before after; do
        dir=$work; [ $tree = before ] && dir=$before
        echo "== ab transformer $b $tree" >> "$log"
        (cd "$dir" && timeout "${PROFILE_TIMEOUT:-50}" "$node" --import tsx bench/transformer.ts --tfjs off --batch "$b" --steps "${AB_STEPS:-20}" --warmup 3 2>>"$log") |
          python3 -c "import json, sys
for line in sys.stdin:
    try: p = json.loads(line)
    except ValueError: continue
    print(json.dumps({'tree': '$tree', 'run': $run, 'bench': 'transformer', 'batch': $b, **p['ours']}))" | tee -a "$out/ab.jsonl"
      done
    done
    for tree in before after; do
      dir=$work; [ $tree = before ] && dir=$before
      echo "== ab gpu-step $tree" >> "$log"
      (cd "$dir" && timeout "${PROFILE_TIMEOUT:-50}" "$node" --import tsx bench/gpu-step.ts --batches "${AB_CNN_BATCHES:-64,256}" --mlp-batch "${AB_MLP_BATCH:-128}" \
        --samples "${AB_SAMPLES:-4096}" --rounds 2 2>>"$log") |
        python3 -c "import json, sys
for line in sys.stdin:
    try: p = json.loads(line)
    except ValueError: continue
    print(json.dumps({'tree': '$tree', 'run': $run, 'bench': 'gpu-step', 'steps': p['steps']}))" | tee -a "$out/ab.jsonl"
    done
  done
fi

if [ -n "${MATMUL_SIZES-1024,2048,4096,8192}" ]; then
  echo "== matmul: the chosen kernel and both GPU variants (bench/kernels.ts)"
  timeout "${MATMUL_TIMEOUT:-90}" "$node" --import tsx bench/kernels.ts --json --no-tfjs --rounds 3 --sizes "${MATMUL_SIZES-1024,2048,4096,8192}" --group-rows "${MATMUL_GROUP_ROWS-}" 2>>"$log" > "$out/matmul.json"; echo "exit $?"
  cat "$out/matmul.json"
fi
echo "== done; stderr of every command: $log"
tail -n 20 "$log"

#!/usr/bin/env bash
# On a machine with a GPU, from the root of a checkout that holds gpu/ (packed by
# scripts/gpu-bundle.sh on a build machine and copied here with the checkout):
#   bash gpu/run.sh                   # the GPU tests and benchmarks, most needed first
#   bash gpu/run.sh decode rnn        # or the parts named
# Parts, in the order they run: kernels, speed, train, demo, serve, serve-join, decode, rnn,
# ensemble, cudnn, profile, host; the default is "kernels speed train decode rnn ensemble" (with
# demo when no model is packed). The whole run keeps to TERN_GPU_DEADLINE seconds (270; raise it
# for a longer run): a program gets what is left of it (at most TERN_GPU_TIMEOUT, 240), and one
# that would get under 10 s is skipped and listed, so the most needed figures come first.
set -uo pipefail
start=$SECONDS
# Every log and JSON line goes to one folder, packed into $OUT/gpu-logs.tgz (OUT: /tmp/gpu-out
# unless set) after each part, one file to copy back; a summary table is printed last.
final=${OUT:-/tmp/gpu-out}; mkdir -p "$final"
out=/tmp/gpu-logs; rm -rf "$out"; mkdir -p "$out"
pack() { tar czf "$final/gpu-logs.tgz" -C /tmp gpu-logs; }
limit=${TERN_GPU_TIMEOUT:-240}
deadline=${TERN_GPU_DEADLINE:-270}
t() {
  local left=$((deadline - (SECONDS - start)))
  ((left < limit)) || left=$limit
  if ((left < 10)); then
    echo "gpu/run.sh: skipped (deadline): $*" | tee -a "$out/skipped.txt" >&2
    return 124
  fi
  timeout "$left" "$@"
}
# Without a model packed (TERN_GPU_MODEL at bundle time), the default trains the demo's on the GPU
# first (600 updates, about half a minute on an H100), so that decode's end-to-end figures run.
default="kernels speed train decode rnn ensemble"
if [ ! -f gpu/data/model.tern ]; then
  default="kernels speed train demo decode rnn ensemble"
  : "${TERN_GPU_DEMO_UPDATES:=600}"
fi
parts=" ${*:-$default} "
want() { [[ "$parts" == *" $1 "* ]]; }
# The programs and libraries come packed with xz (scripts/gpu-bundle.sh), unpacked at each run.
# (bin/ and lib/ side by side: the programs find the SentencePiece shim in ../lib.)
bin=/tmp/tern-gpu/bin lib=/tmp/tern-gpu/lib; mkdir -p "$bin" "$lib"
unxz_to() {
  local f
  for f in "$1"/*.xz; do
    [ -e "$f" ] || continue
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$f" "$2/$(basename "$f" .xz)"
  done
}
unxz_to gpu/bin "$bin"; unxz_to gpu/lib "$lib"; chmod +x "$bin"/*
cuda_libs=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/*.so*")})))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$lib:/usr/local/cuda/lib64:${cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/device.txt"
status=0
if want kernels; then
  t $bin/cuda_kernels_test 2>&1 | tee "$out/cuda_kernels_test.log" | tail -3 || status=1
  # The CUDA pool's reuse, page-locked memory, and StagingRing's fences on a real queue.
  t $bin/tensor_test 2>&1 | tee "$out/tensor_test.log" | tail -3 || status=1
  # Every graph op's gradient check, its graph also built on the GPU against the CPU's.
  t $bin/graph_test 2>&1 | tee "$out/graph_test.log" | tail -3 || status=1
  t $bin/optim_cuda_test 2>&1 | tee "$out/optim_cuda_test.log" | tail -3 || status=1
  t $bin/comm_nccl_test 2>&1 | tee "$out/comm_nccl_test.log" | tail -3 || status=1
  t $bin/ps_gpu_test 2>&1 | tee "$out/ps_gpu_test.log" | tail -3 || status=1
  pack
fi
if want speed; then
  # Training throughput on the GPU beside PyTorch's (where the machine's python3 has torch) in
  # the same run, Tern and PyTorch alternating, at batch 256 (batch 64 too with
  # TERN_GPU_SPEED_BATCHES="256 64": about a minute more).
  for batch in ${TERN_GPU_SPEED_BATCHES:-256}; do
    for precision in float32 bf16; do
      # The median of 5 windows of 10 steps each, both sides (in a single window of 20 steps
      # PyTorch's rate varies up to 1.5x from run to run).
      t $bin/bench-train-step --device cuda --models base --steps 10 --windows 5 --batch $batch --precision $precision | tee -a "$out/bench-train-step.jsonl" || status=1
      PYTHONUNBUFFERED=1 t python3 bench/train_step_torch.py --device cuda --models base --steps 10 --windows 5 --batch $batch --dtype $precision | tee -a "$out/bench-train-step.jsonl" || status=1
    done
  done
  pack
fi
if want train; then
  TERN_GPU_TEST_DATA=gpu/data t $bin/trainer_gpu_test --gtest_filter=-*DemoPreset* 2>&1 | tee "$out/trainer_gpu_test.log" | tail -3 || status=1
  t $bin/trainer_batch_uploader_test 2>&1 | tee "$out/trainer_batch_uploader_test.log" | tail -3 || status=1
  pack
fi
if want demo; then
  # The demo's preset trained on the GPU (TERN_GPU_DEMO_UPDATES updates of the whole corpus), then
  # exported with a shortlist and clusters: the model of the decoding part.
  data=/tmp/tern-demo-data; mkdir -p "$data"
  for f in gpu/demo-data/*.xz; do python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$f" "$data/$(basename "$f" .xz)"; done
  TERN_GPU_TEST_DATA=$data TERN_GPU_DEMO_CONFIG=configs/bible-small.pbtxt TERN_GPU_DEMO_DIR=/tmp/tern-demo \
    TERN_GPU_DEMO_UPDATES=${TERN_GPU_DEMO_UPDATES:-1200} t $bin/trainer_gpu_test --gtest_filter=*DemoPreset* 2>&1 \
    | tee "$out/demo_train.log" | grep -E "\[(train|valid)\]|OK|FAILED" | tail -40 || status=1
  if [ ! -f gpu/data/model.tern ] && [ -f /tmp/tern-demo/checkpoint.latest ]; then
    t $bin/tern-export --checkpoint /tmp/tern-demo --out gpu/data/model.tern --threads 16 \
      --shortlist-src "$data/train.es" --shortlist-tgt "$data/train.en" --clusters 64 \
      --cluster-src "$data/train.es" --cluster_sentences 500 2>&1 | tail -3 | tee "$out/export.log" || status=1
  fi
  pack
fi
if want serve; then
  # Serving on the GPU: the scheduler's GPU cases, then tern-serve --device cuda under open-loop
  # load (bench/bench_serve.py) on the 1,091 held-out lines, beam 4 (the fused output pass and
  # --join-ratio 0.5, cuda's defaults), batches of up to 256 sentences and 16,384 tokens:
  # continuous and static batching with requests of 1 and 16 sentences, the one-at-a-time server
  # with 1, each beside the offline tern-translate --device cuda with the same switches.
  t $bin/inference_serve_test 2>&1 | tee "$out/inference_serve_test.log" | tail -3 || status=1
  if [ -f gpu/data/model.tern ]; then
    s=(--model gpu/data/model.tern --bin "$bin" --src gpu/data/serve.es --threads 4
       --runtime "--beam 4 --device cuda --max-batch-tokens 16384 --max-batch-sentences 256"
       --offline-times 10 --lone 100 --seconds 3,6 --min-requests 200 --give-up 5 --drain 60
       --json "$out/bench-serve-gpu.jsonl")
    t python3 bench/bench_serve.py "${s[@]}" --modes continuous --sizes 1,16 \
      --loads ${TERN_GPU_SERVE_LOADS:-200,400,800,1600,3200} 2>&1 >/dev/null | tee "$out/bench-serve-gpu.txt" || status=1
    pack
    t python3 bench/bench_serve.py "${s[@]}" --modes static --sizes 1,16 \
      --loads ${TERN_GPU_SERVE_LOADS:-200,400,800,1600,3200} 2>&1 >/dev/null | tee -a "$out/bench-serve-gpu.txt" || status=1
    t python3 bench/bench_serve.py "${s[@]}" --modes serial --sizes 1 --loads 50,100,200,400 \
      2>&1 >/dev/null | tee -a "$out/bench-serve-gpu.txt" || status=1
    python3 - "$out/bench-serve-gpu.jsonl" <<'PY' | tee -a "$out/bench-serve-gpu.txt"
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["kind"] == "offline":
        print("offline before %s: %.0f words/s (whole process %.0f)"
              % (r["mode"], r["words_per_second"], r["process_words_per_second"]))
PY
  fi
  pack
fi
if want serve-join && [ -f gpu/data/model.tern ]; then
  # Continuous batching's join policy and batch limits on the GPU (tern-serve --join-ratio,
  # --max-batch-tokens/--max-batch-sentences), one configuration after another, each beside its
  # offline tern-translate with the same runtime switches: bursts and two loads, 1 and 16 sentences.
  j=(--model gpu/data/model.tern --bin "$bin" --src gpu/data/serve.es --threads 4 --lone 100
     --offline-times 10
     --seconds 3,6 --min-requests 200 --give-up 5 --drain 60 --sizes 1,16 --loads 800,1600
     --json "$out/bench-serve-join.jsonl")
  big="--max-batch-tokens 16384 --max-batch-sentences 256"
  for config in "continuous|--join-ratio 0|" "continuous|--join-ratio 0.5 --join-wait-steps 20|" \
                "continuous|--join-ratio 0|$big" "continuous|--join-ratio 0.5 --join-wait-steps 20|$big" \
                "static||$big"; do
    IFS='|' read -r mode flags batch <<<"$config"
    echo "== $mode $flags ${batch:-default batch limits}" | tee -a "$out/bench-serve-join.txt"
    t python3 bench/bench_serve.py "${j[@]}" --modes "$mode" --serve-flags "$flags" \
      --runtime "--beam 4 --device cuda $batch" 2>&1 >/dev/null | tee -a "$out/bench-serve-join.txt" || status=1
  done
  pack
fi
if want decode; then
  t $bin/inference_test --gtest_filter='FusedTopK*:*DeviceDecoding*' 2>&1 | tee "$out/inference_gpu_test.log" | tail -3 || status=1
  # The GRU runtime on the GPU against the CPU's (and all of its CPU tests, a few seconds).
  t $bin/rnn_graph_runtime_equality_test 2>&1 | tee "$out/rnn_gpu_test.log" | tail -3 || status=1
  t $bin/bench-fused-output | tee "$out/bench-fused-output.jsonl" || status=1
  if [ -f gpu/data/model.tern ]; then
    # End to end on the test books at batch 64 (sentences; top-up keeps 64 places): the host's 16
    # cores (the reference) against the GPU, plain, fused, top-up, shortlist (per batch and per
    # sentence), clusters, bf16; then batch 1.
    d=(--model gpu/data/model.tern --input gpu/data/test.es --ref gpu/data/test.en --repeats 2)
    t $bin/bench-decode "${d[@]}" --threads 16 --beams 1,4 --max_batch_tokens 100000 --max_batch_sentences 64 \
      --configs fused,gpu,gpu+fused,gpu+fused+topup,gpu+fused+shortlist,gpu+fused+sentshort,gpu+fused+clusters,gpu+bf16+fused \
      | tee -a "$out/bench-decode.jsonl" || status=1
    t $bin/bench-decode "${d[@]}" --threads 16 --beams 1,4 --max_batch_sentences 1 --max_sentences 80 \
      --configs fused,gpu+fused | tee -a "$out/bench-decode.jsonl" || status=1
    # Top-up against plain batching where lengths vary most (gpu/data/varied: 5 to 54 words).
    t $bin/bench-decode --model gpu/data/model.tern --input gpu/data/varied.es \
      --ref gpu/data/varied.en --repeats 3 --threads 16 --beams 1,4 --max_batch_tokens 1024 \
      --configs fused,gpu+fused,gpu+fused+topup | tee -a "$out/bench-decode-varied.jsonl" || status=1
  fi
  pack
fi
if want rnn; then
  # The GRU preset (configs/bible-s2s.pbtxt) trained on the GPU for TERN_GPU_RNN_UPDATES updates,
  # its training step timed there, and its model translating the test books on the host's 16
  # cores (the reference) and on the GPU.
  data=/tmp/tern-demo-data; mkdir -p "$data"
  for f in gpu/demo-data/*.xz; do [ -f "$data/$(basename "$f" .xz)" ] || python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$f" "$data/$(basename "$f" .xz)"; done
  # One bidirectional GRU layer, ours against torch.nn.GRU's cuDNN kernels in the same run: whether
  # cuDNN's GRU would beat our fused steps for an encoder without layer normalization.
  for precision in float32 bf16; do
    t $bin/bench-train-step --device cuda --models gru,gru-wmt --steps 10 --windows 3 --precision $precision | tee -a "$out/bench-train-step-gru.jsonl" || status=1
    PYTHONUNBUFFERED=1 t python3 bench/train_step_torch.py --device cuda --models gru,gru-wmt --steps 10 --windows 3 --dtype $precision | tee -a "$out/bench-train-step-gru.jsonl" || status=1
  done
  t $bin/bench-train-step --device cuda --models s2s --steps 10 | tee -a "$out/bench-train-step-s2s.jsonl" || status=1
  t $bin/bench-train-step --device cuda --models s2s --steps 10 --precision bf16 | tee -a "$out/bench-train-step-s2s.jsonl" || status=1
  TERN_GPU_TEST_DATA=$data TERN_GPU_DEMO_CONFIG=configs/bible-s2s.pbtxt TERN_GPU_DEMO_DIR=/tmp/tern-s2s \
    TERN_GPU_DEMO_UPDATES=${TERN_GPU_RNN_UPDATES:-600} t $bin/trainer_gpu_test --gtest_filter=*DemoPreset* 2>&1 \
    | tee "$out/s2s_train.log" | grep -E "\[(train|valid)\]|OK|FAILED" | tail -20 || status=1
  if [ -f /tmp/tern-s2s/checkpoint.latest ]; then
    t $bin/tern-export --checkpoint /tmp/tern-s2s --out /tmp/tern-s2s/model.tern --threads 16 2>&1 | tail -2 || status=1
    t $bin/bench-decode --model /tmp/tern-s2s/model.tern --input gpu/data/test.es --ref gpu/data/test.en \
      --repeats 2 --threads 16 --beams 1,4 --max_batch_tokens 100000 --max_batch_sentences 64 --configs fused,gpu,gpu+fused,gpu+fused+topup \
      | tee -a "$out/bench-decode-s2s.jsonl" || status=1
  fi
  pack
fi
if want ensemble && [ -f gpu/data/model.tern ]; then
  # An ensemble of the model with itself (the translations must be the model's alone: identical
  # 1.000), its mean made on the GPU, unfused and fused, against the host's 16 cores fused.
  t $bin/bench-decode --model gpu/data/model.tern --ensemble gpu/data/model.tern \
    --input gpu/data/test.es --ref gpu/data/test.en --repeats 2 --threads 16 --beams 4 \
    --max_batch_tokens 100000 --max_batch_sentences 64 --configs gpu+fused,gpu+ens,gpu+ens+fused,ens+fused \
    | tee -a "$out/bench-decode-ensemble.jsonl" || status=1
  pack
fi
if want cudnn; then
  # cuDNN's whole GRU layers; alone it takes about 6 minutes:
  #   TERN_GPU_DEADLINE=420 bash gpu/run.sh cudnn
  # Which cuDNN the binaries load (the pip package's, through LD_LIBRARY_PATH) and PyTorch's.
  ldd $bin/models_gru_layer_test | grep -i cudnn | tee "$out/cudnn-libs.txt"
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' 2>&1 | tee -a "$out/cudnn-libs.txt"
  # cuDNN's layers against Tern's steps: forward and every gradient on random shapes, lengths and
  # masks in float32, bf16 and fp16, whole s2s and devlin models, no host wait; then the op's
  # gradient check, its graph built on the GPU against the CPU's reference.
  t $bin/models_gru_layer_test 2>&1 | tee "$out/models_gru_layer_test.log" | tail -3 || status=1
  t $bin/graph_test --gtest_filter='GruLayer*' 2>&1 | tee "$out/graph_gru_layer_test.log" | tail -3 || status=1
  # One bidirectional layer (256 -> 256 at 64 x 40, 512 -> 1024 at 80 x 50): Tern's steps, Tern
  # through cuDNN, torch.nn.GRU, in turn, per precision (the aim: cuDNN's path at >= 0.95 of
  # PyTorch's rate).
  for precision in float32 bf16 fp16; do
    for mode in steps auto; do
      TERN_GRU_LAYERS=$mode t $bin/bench-train-step --device cuda --models gru,gru-wmt --steps 10 --windows 3 \
        --precision $precision --gemm_rates=false | tee -a "$out/bench-train-step-cudnn.jsonl" || status=1
    done
    PYTHONUNBUFFERED=1 t python3 bench/train_step_torch.py --device cuda --models gru,gru-wmt --steps 10 --windows 3 \
      --dtype $precision | tee -a "$out/bench-train-step-cudnn.jsonl" || status=1
  done
  # The whole s2s step (bible-s2s-cudnn's shape) before and after.
  for precision in float32 bf16; do
    for mode in steps auto; do
      TERN_GRU_LAYERS=$mode t $bin/bench-train-step --device cuda --models s2s-cudnn --steps 10 --windows 3 \
        --precision $precision --gemm_rates=false | tee -a "$out/bench-train-step-cudnn.jsonl" || status=1
    done
  done
  # What the weights' repack costs beside cuDNN's own kernels: Nsight Compute's durations of a
  # gru-wmt step in bf16 (two warm-up steps and one timed), summed by kernel.
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  t "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$out/cudnn-profile.csv" \
    $bin/bench-train-step --device cuda --models gru-wmt --precision bf16 --steps 1 --gemm_rates=false \
    > "$out/cudnn-profile.log" 2>&1 || status=1
  python3 - "$out/cudnn-profile.csv" <<'PY' | tee "$out/cudnn-profile-summary.txt"
import csv, collections, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; name = head.index("Kernel Name"); value = head.index("Metric Value")
unit = head.index("Metric Unit"); scale = {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9}
total = collections.Counter()
for r in rows[1:]:
    total[r[name][:80]] += float(r[value].replace(",", "")) * scale.get(r[unit], 1)
all_ns = sum(total.values())
ours = sum(ns for k, ns in total.items() if "Kernel" in k and any(
    w in k for w in ("Pack", "Unpack", "Lengths", "Finish", "PrepareGrad", "AddInputGrad")))
print(f"a gru-wmt step (3 steps measured): {all_ns / 3e6:.3f} ms of kernels; the repack and "
      f"the padding's kernels {ours / 3e6:.3f} ms ({100 * ours / max(all_ns, 1):.1f}%)")
for k, ns in total.most_common(15):
    print(f"{ns / 3e6:8.3f} ms {100 * ns / all_ns:5.1f}%  {k}")
PY
  # bible-s2s-cudnn trained on the GPU for TERN_GPU_CUDNN_UPDATES (600) updates with whole layers
  # and with the steps, same seeds: the dev cross-entropy at each validation, side by side (with
  # TERN_GPU_CUDNN_NOISE=1 the steps twice, for the run-to-run noise).
  data=/tmp/tern-demo-data; mkdir -p "$data"
  for f in gpu/demo-data/*.xz; do [ -f "$data/$(basename "$f" .xz)" ] || python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$f" "$data/$(basename "$f" .xz)"; done
  runs="auto steps"
  [ "${TERN_GPU_CUDNN_NOISE:-0}" = 1 ] && runs="auto steps steps2"
  for run in $runs; do
    TERN_GRU_LAYERS=${run%2} TERN_GPU_TEST_DATA=$data TERN_GPU_DEMO_CONFIG=configs/bible-s2s-cudnn.pbtxt \
      TERN_GPU_DEMO_DIR=/tmp/tern-cudnn-$run TERN_GPU_DEMO_UPDATES=${TERN_GPU_CUDNN_UPDATES:-600} \
      t $bin/trainer_gpu_test --gtest_filter=*DemoPreset* > "$out/cudnn_train_$run.log" 2>&1 || status=1
    grep -E "valid ce-mean-words|OK \]|FAILED" "$out/cudnn_train_$run.log" | tail -6
  done
  python3 - "$out" $runs <<'PY' | tee "$out/cudnn-curves.txt"
import re, sys
out, runs = sys.argv[1], sys.argv[2:]
curves = {}
for run in runs:
    for line in open(f"{out}/cudnn_train_{run}.log", errors="replace"):
        m = re.search(r"Up\. (\d+) : valid ce-mean-words : ([0-9.]+)", line)
        if m:
            curves.setdefault(run, {})[int(m.group(1))] = float(m.group(2))
updates = sorted(set().union(*[c.keys() for c in curves.values()])) if curves else []
print("update " + " ".join(f"{r:>9}" for r in runs))
for u in updates:
    print(f"{u:6d} " + " ".join(f"{curves.get(r, {}).get(u, float('nan')):9.4f}" for r in runs))
def gap(a, b):
    both = [u for u in updates if u in curves.get(a, {}) and u in curves.get(b, {})]
    return max((abs(curves[a][u] - curves[b][u]) for u in both), default=float("nan"))
print(f"dev cross-entropy, largest gap whole vs steps: {gap('auto', 'steps'):.4f}"
      + (f"; steps vs steps again (noise): {gap('steps', 'steps2'):.4f}" if "steps2" in runs else ""))
PY
  pack
fi
if want profile; then
  # Where a step's time goes: Nsight Compute's duration of every kernel of three steps of the
  # base shape at batch 256 in bf16 (two warm-up, one timed), summed by kernel name.
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  t "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$out/profile.csv" \
    $bin/bench-train-step --device cuda --models base --batch 256 --precision bf16 --steps 1 \
    --gemm_rates=false > "$out/profile.log" 2>&1 || status=1
  python3 - "$out/profile.csv" <<'PY' | tee "$out/profile-summary.txt"
import csv, collections, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]; name = head.index("Kernel Name"); value = head.index("Metric Value")
unit = head.index("Metric Unit"); scale = {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9}
total = collections.Counter(); count = collections.Counter()
for r in rows[1:]:
    k = r[name][:90]; total[k] += float(r[value].replace(",", "")) * scale.get(r[unit], 1); count[k] += 1
all_ns = sum(total.values())
print(f"kernels {sum(count.values())} total {all_ns / 3e6:.2f} ms per step")
for k, ns in total.most_common(40):
    print(f"{ns / 3e6:8.3f} ms {100 * ns / all_ns:5.1f}% x{count[k] // 3:4d}  {k}")
PY
  pack
fi
if want host; then
  # The host CPU: the integer GEMM's AVX-512 kernels run where it has AVX-512 (this build machine
  # has none), against the exact reference, then timed against sgemm.
  grep -o 'avx512[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' ' | tee "$out/cpu-avx512.txt"; echo
  t $bin/int_gemm_test 2>&1 | tee "$out/int_gemm_test.log" | tail -3 || status=1
  for isa in avx2 avx512; do
    TERN_ISA=$isa t $bin/bench-gemm | sed "s/^/$isa /" | tee -a "$out/bench-gemm.txt"
  done
  pack
fi
pack
ELAPSED=$((SECONDS - start)) && export ELAPSED
# The table the reply shows: each test log's verdict and the throughput against PyTorch.
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import glob, json, os, re, sys
out = sys.argv[1]
for log in sorted(glob.glob(out + "/*.log")):
    lines = open(log, errors="replace").read().splitlines()
    counts = {}
    for word in ("PASSED", "SKIPPED", "FAILED"):
        found = [re.match(r"\[ *%s *\] (\d+) tests?[.,]" % word, l) for l in lines]
        counts[word] = next((int(m.group(1)) for m in found if m), 0)
    failed = [l.split("]")[1].split(" (")[0].strip() for l in lines
              if l.startswith("[  FAILED  ]") and l.endswith(" ms)")]
    ran = any(l.startswith("[==========]") for l in lines)
    print(f"{os.path.basename(log):36s} " + (
        f"passed {counts['PASSED']} skipped {counts['SKIPPED']} failed {counts['FAILED']}"
        if ran else "no gtest summary (crashed or not a test?)"))
    for f in failed[:8]:
        print(f"    FAILED {f}")
rows = {}
for path in glob.glob(out + "/bench-train-step*.jsonl"):
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        key = (r.get("model"), r.get("batch"), r.get("dtype") or r.get("precision"))
        who = "torch" if r.get("bench") == "train_step_torch" else "tern"
        if who == "tern" and str(r.get("model")).startswith(("gru", "bible-s2s")):
            who = "tern/" + ("cudnn" if r.get("gru_layers", "").startswith("whole") else "steps")
        rows.setdefault(key, {}).setdefault(who, []).append(r.get("target_tokens_per_s"))
        w = r.get("window_tokens_per_s") or []
        if w:
            rows[key].setdefault(who + "_range", []).append(f"{min(w):.0f}-{max(w):.0f}")
        if who.startswith("tern"):
            rows[key].setdefault("waits", []).append(r.get("host_waits_per_step"))
for key, v in sorted(rows.items(), key=str):
    torch = v.get("torch", [])
    for who in sorted(w for w in v if w.startswith("tern") and not w.endswith("_range")):
        tern = v[who]
        ratio = f"{max(tern) / max(torch):.2f}" if tern and torch else "-"
        print(f"{str(key):40s} {who} {tern} torch {torch} ratio {ratio} "
              f"(tern's host waits a step: {v.get('waits')}; windows: tern "
              f"{v.get(who + '_range')} torch {v.get('torch_range')})")
for path in sorted(glob.glob(out + "/bench-decode*.jsonl")):
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        print(f"{os.path.basename(path):28s} batch {r.get('max_batch_sentences') or '-':>2} "
              f"beam {r.get('beam')} {r.get('config'):18s} "
              f"{r.get('words_per_s')} words/s, x{r.get('speedup')}, "
              f"host waits a step {r.get('host_waits_per_step')}")
if os.path.exists(out + "/skipped.txt"):
    print(open(out + "/skipped.txt").read().strip())
print(f"elapsed {os.environ.get('ELAPSED', '?')} s")
PY
pack
exit $status

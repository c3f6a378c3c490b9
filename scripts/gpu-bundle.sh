#!/usr/bin/env bash
# Builds the GPU tests and benchmarks here (and the integer GEMM's, for the host CPU's AVX-512) (no GPU needed) and packs them, with the Debian shared
# libraries the device machine's image lacks, into gpu/ (ignored by git), for the device tool:
#   scripts/gpu-bundle.sh                    # here: build + pack (under 64 MiB)
#   run(command="bash gpu/run.sh", carry=["gpu"])   # there: every GPU test and benchmark,
#                                                   # logs and JSON lines under $OUT
#   run(command="bash gpu/run.sh decode", ...)      # or some of the parts: kernels, train,
#                                                   # speed, demo, decode, profile, host
# The decoding benchmark needs a model file: TERN_GPU_MODEL (default: the demo's int16 export,
# work/bible-small/model.int16.tern), packed when it exists.
# The CUDA libraries (cudart, cuBLAS, NCCL) are not packed: the device image has CUDA 13's, found
# through /usr/local/cuda and the pip packages' folders at run time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
targets=(cuda_kernels_test optim_cuda_test comm_nccl_test ps_gpu_test trainer_gpu_test trainer_batch_uploader_test inference_test rnn_graph_runtime_equality_test bench-fused-output bench-train-step int_gemm_test bench-gemm bench-decode tern-export)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA=ON >/dev/null
cmake --build build -j"$(nproc)" --target "${targets[@]}"
rm -rf gpu && mkdir -p gpu/bin gpu/lib
for t in "${targets[@]}"; do cp "build/bin/$t" gpu/bin/; done
# The SentencePiece shim (loaded at run time) and every shared library the binaries and it load,
# except the C/C++ runtime and CUDA's own.
cp build/lib/libtern_spm_shim.so gpu/lib/
{ for t in "${targets[@]}"; do ldd "build/bin/$t"; done; ldd build/lib/libtern_spm_shim.so; } | awk '$3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libstdc++*|libgcc_s*|ld-linux*) ;;
      libcu*|libnccl*|libnv*) ;;
      *) cp -L "$path" "gpu/lib/$name" ;;
    esac
  done
# OpenBLAS is most of the bundle's bytes: packed with xz, unpacked there by run.sh.
xz -T0 -6 gpu/lib/libopenblas.so.0
# A slice of the corpus for the GPU training test (prepared here when missing).
corpus=build/corpus/bible
[ -f "$corpus/train.es" ] || scripts/prepare-corpus.sh "$corpus" >/dev/null
mkdir -p gpu/data
for f in train.es train.en; do head -n 1500 "$corpus/$f" > "gpu/data/$f"; done
for f in dev.es dev.en; do head -n 40 "$corpus/$f" > "gpu/data/$f"; done
cp "$corpus/test.es" "$corpus/test.en" gpu/data/
# A set of high length variance for top-up batching: the 100 shortest and the 100 longest of the
# held-out lines, alternating.
python3 - "$corpus/reserved.es" "$corpus/reserved.en" gpu/data/varied <<'PY'
import sys
src, tgt = open(sys.argv[1]).read().splitlines(), open(sys.argv[2]).read().splitlines()
order = sorted(range(len(src)), key=lambda i: (len(src[i].split()), i))
short, long = order[:100], order[-100:][::-1]
picked = [i for pair in zip(short, long) for i in pair]
open(sys.argv[3] + ".es", "w").write("".join(src[i] + "\n" for i in picked))
open(sys.argv[3] + ".en", "w").write("".join(tgt[i] + "\n" for i in picked))
PY
# The whole corpus for the demo preset's training run on the GPU (xz: unpacked there).
mkdir -p gpu/demo-data
for f in train.es train.en dev.es dev.en; do xz -T0 -6 -c "$corpus/$f" > "gpu/demo-data/$f.xz"; done
model=${TERN_GPU_MODEL:-work/bible-small/model.int16.tern}
if [ -f "$model" ]; then cp "$model" gpu/data/model.tern; else echo "gpu-bundle: no $model; the decoding benchmark will be skipped" >&2; fi
cat > gpu/run.sh <<'RUN'
#!/usr/bin/env bash
# On the device machine, from the repository root: every GPU test and benchmark of the bundle, or
# the parts named (kernels, train, speed, demo, decode, rnn, profile, host).
set -uo pipefail
# Every log and JSON line goes to one folder, packed into $OUT/gpu-logs.tgz after each part (the
# device tool brings back at most 8 files); each program gets TERN_GPU_TIMEOUT seconds (240).
final=${OUT:-/tmp/gpu-out}; mkdir -p "$final"
out=/tmp/gpu-logs; rm -rf "$out"; mkdir -p "$out"
pack() { tar czf "$final/gpu-logs.tgz" -C /tmp gpu-logs; }
limit=${TERN_GPU_TIMEOUT:-240}
t() { timeout "$limit" "$@"; }
parts=" ${*:-kernels train speed demo decode rnn host} "
want() { [[ "$parts" == *" $1 "* ]]; }
lib=/tmp/tern-gpu-lib; mkdir -p "$lib"
[ -f "$lib/libopenblas.so.0" ] || python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' gpu/lib/libopenblas.so.0.xz "$lib/libopenblas.so.0"
cuda_libs=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/*.so*")})))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$lib:$PWD/gpu/lib:/usr/local/cuda/lib64:${cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/device.txt"
status=0
if want kernels; then
  t gpu/bin/cuda_kernels_test 2>&1 | tee "$out/cuda_kernels_test.log" | tail -3 || status=1
  t gpu/bin/optim_cuda_test 2>&1 | tee "$out/optim_cuda_test.log" | tail -3 || status=1
  t gpu/bin/comm_nccl_test 2>&1 | tee "$out/comm_nccl_test.log" | tail -3 || status=1
  t gpu/bin/ps_gpu_test 2>&1 | tee "$out/ps_gpu_test.log" | tail -3 || status=1
  pack
fi
if want train; then
  TERN_GPU_TEST_DATA=gpu/data t gpu/bin/trainer_gpu_test --gtest_filter=-*DemoPreset* 2>&1 | tee "$out/trainer_gpu_test.log" | tail -3 || status=1
  t gpu/bin/trainer_batch_uploader_test 2>&1 | tee "$out/trainer_batch_uploader_test.log" | tail -3 || status=1
  pack
fi
if want speed; then
  # Training throughput on the GPU beside PyTorch's (the device image has it) in the same run, at
  # the shapes' batch of 64 sentences and at 256.
  for batch in 64 256; do
    for precision in float32 bf16; do
      t gpu/bin/bench-train-step --device cuda --steps 10 --batch $batch --precision $precision | tee -a "$out/bench-train-step.jsonl" || status=1
      t python3 bench/train_step_torch.py --device cuda --batch $batch --dtype $precision | tee -a "$out/bench-train-step.jsonl" || status=1
    done
  done
  pack
fi
if want demo; then
  # The demo's preset trained on the GPU (TERN_GPU_DEMO_UPDATES updates of the whole corpus), then
  # exported with a shortlist and clusters: the model of the decoding part.
  data=/tmp/tern-demo-data; mkdir -p "$data"
  for f in gpu/demo-data/*.xz; do python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$f" "$data/$(basename "$f" .xz)"; done
  TERN_GPU_TEST_DATA=$data TERN_GPU_DEMO_CONFIG=configs/bible-small.pbtxt TERN_GPU_DEMO_DIR=/tmp/tern-demo \
    TERN_GPU_DEMO_UPDATES=${TERN_GPU_DEMO_UPDATES:-1200} t gpu/bin/trainer_gpu_test --gtest_filter=*DemoPreset* 2>&1 \
    | tee "$out/demo_train.log" | grep -E "\[(train|valid)\]|OK|FAILED" | tail -40 || status=1
  if [ ! -f gpu/data/model.tern ] && [ -f /tmp/tern-demo/checkpoint.latest ]; then
    t gpu/bin/tern-export --checkpoint /tmp/tern-demo --out gpu/data/model.tern --threads 16 \
      --shortlist-src "$data/train.es" --shortlist-tgt "$data/train.en" --clusters 64 \
      --cluster-src "$data/train.es" --cluster_sentences 500 2>&1 | tail -3 | tee "$out/export.log" || status=1
  fi
  pack
fi
if want decode; then
  t gpu/bin/inference_test --gtest_filter='FusedTopK*:*DeviceDecoding*' 2>&1 | tee "$out/inference_gpu_test.log" | tail -3 || status=1
  # The GRU runtime on the GPU against the CPU's (and all of its CPU tests, a few seconds).
  t gpu/bin/rnn_graph_runtime_equality_test 2>&1 | tee "$out/rnn_gpu_test.log" | tail -3 || status=1
  t gpu/bin/bench-fused-output | tee "$out/bench-fused-output.jsonl" || status=1
  if [ -f gpu/data/model.tern ]; then
    # End to end on the test books: the host's 16 cores (the reference) against the GPU, plain,
    # fused, top-up, shortlist, bf16; then batch 1 (a budget of one token: a sentence per batch).
    d=(--model gpu/data/model.tern --input gpu/data/test.es --ref gpu/data/test.en --repeats 2)
    t gpu/bin/bench-decode "${d[@]}" --threads 16 --beams 1,4 --max_batch_tokens 2048 \
      --configs fused,gpu,gpu+fused,gpu+fused+topup,gpu+fused+shortlist,gpu+fused+clusters,gpu+bf16+fused \
      | tee -a "$out/bench-decode.jsonl" || status=1
    t gpu/bin/bench-decode "${d[@]}" --threads 16 --beams 1,4 --max_batch_tokens 1 --max_sentences 80 \
      --configs fused,gpu+fused | tee -a "$out/bench-decode.jsonl" || status=1
    # Top-up against plain batching where lengths vary most (gpu/data/varied: 5 to 54 words).
    t gpu/bin/bench-decode --model gpu/data/model.tern --input gpu/data/varied.es \
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
  t gpu/bin/bench-train-step --device cuda --models s2s --steps 10 | tee -a "$out/bench-train-step-s2s.jsonl" || status=1
  TERN_GPU_TEST_DATA=$data TERN_GPU_DEMO_CONFIG=configs/bible-s2s.pbtxt TERN_GPU_DEMO_DIR=/tmp/tern-s2s \
    TERN_GPU_DEMO_UPDATES=${TERN_GPU_RNN_UPDATES:-600} t gpu/bin/trainer_gpu_test --gtest_filter=*DemoPreset* 2>&1 \
    | tee "$out/s2s_train.log" | grep -E "\[(train|valid)\]|OK|FAILED" | tail -20 || status=1
  if [ -f /tmp/tern-s2s/checkpoint.latest ]; then
    t gpu/bin/tern-export --checkpoint /tmp/tern-s2s --out /tmp/tern-s2s/model.tern --threads 16 2>&1 | tail -2 || status=1
    t gpu/bin/bench-decode --model /tmp/tern-s2s/model.tern --input gpu/data/test.es --ref gpu/data/test.en \
      --repeats 2 --threads 16 --beams 1,4 --max_batch_tokens 2048 --configs fused,gpu,gpu+fused,gpu+fused+topup \
      | tee -a "$out/bench-decode-s2s.jsonl" || status=1
  fi
  pack
fi
if want profile; then
  # Where a step's time goes: Nsight Compute's duration of every kernel of three steps of the
  # base shape at batch 256 in bf16 (two warm-up, one timed), summed by kernel name.
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  t "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$out/profile.csv" \
    gpu/bin/bench-train-step --device cuda --models base --batch 256 --precision bf16 --steps 1 \
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
  t gpu/bin/int_gemm_test 2>&1 | tee "$out/int_gemm_test.log" | tail -3 || status=1
  for isa in avx2 avx512; do
    TERN_ISA=$isa t gpu/bin/bench-gemm | sed "s/^/$isa /" | tee -a "$out/bench-gemm.txt"
  done
  pack
fi
exit $status
RUN
chmod +x gpu/run.sh
du -sh gpu

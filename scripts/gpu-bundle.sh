#!/usr/bin/env bash
# Builds the GPU tests and benchmarks here (and the integer GEMM's, for the host CPU's AVX-512) (no GPU needed) and packs them, with the Debian shared
# libraries the device machine's image lacks, into gpu/ (ignored by git), for the device tool:
#   scripts/gpu-bundle.sh                    # here: build + pack (under 64 MiB)
#   run(command="bash gpu/run.sh", carry=["gpu"])   # there: every GPU test and benchmark,
#                                                   # logs and JSON lines under $OUT
#   run(command="bash gpu/run.sh decode", ...)      # or some of the parts: kernels, train,
#                                                   # decode, host
# The decoding benchmark needs a model file: TERN_GPU_MODEL (default: the demo's int16 export,
# work/bible-small/model.int16.tern), packed when it exists.
# The CUDA libraries (cudart, cuBLAS, NCCL) are not packed: the device image has CUDA 13's, found
# through /usr/local/cuda and the pip packages' folders at run time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
targets=(cuda_kernels_test optim_cuda_test comm_nccl_test ps_gpu_test trainer_gpu_test inference_test bench-fused-output bench-train-step int_gemm_test bench-gemm bench-decode)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA=ON >/dev/null
cmake --build build -j"$(nproc)" --target "${targets[@]}"
rm -rf gpu && mkdir -p gpu/bin gpu/lib
for t in "${targets[@]}"; do cp "build/bin/$t" gpu/bin/; done
# Every shared library the binaries load, except the C/C++ runtime and CUDA's own.
for t in "${targets[@]}"; do ldd "build/bin/$t"; done | awk '$3 ~ /^\// {print $1, $3}' | sort -u |
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
model=${TERN_GPU_MODEL:-work/bible-small/model.int16.tern}
if [ -f "$model" ]; then cp "$model" gpu/data/model.tern; else echo "gpu-bundle: no $model; the decoding benchmark will be skipped" >&2; fi
cat > gpu/run.sh <<'RUN'
#!/usr/bin/env bash
# On the device machine, from the repository root: every GPU test and benchmark of the bundle, or
# the parts named (kernels, train, decode, host).
set -uo pipefail
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
parts=" ${*:-kernels train decode host} "
want() { [[ "$parts" == *" $1 "* ]]; }
lib=/tmp/tern-gpu-lib; mkdir -p "$lib"
[ -f "$lib/libopenblas.so.0" ] || python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' gpu/lib/libopenblas.so.0.xz "$lib/libopenblas.so.0"
cuda_libs=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/*.so*")})))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$lib:$PWD/gpu/lib:/usr/local/cuda/lib64:${cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/device.txt"
status=0
if want kernels; then
  gpu/bin/cuda_kernels_test 2>&1 | tee "$out/cuda_kernels_test.log" | tail -3 || status=1
  gpu/bin/optim_cuda_test 2>&1 | tee "$out/optim_cuda_test.log" | tail -3 || status=1
  gpu/bin/comm_nccl_test 2>&1 | tee "$out/comm_nccl_test.log" | tail -3 || status=1
  gpu/bin/ps_gpu_test 2>&1 | tee "$out/ps_gpu_test.log" | tail -3 || status=1
fi
if want train; then
  TERN_GPU_TEST_DATA=gpu/data gpu/bin/trainer_gpu_test 2>&1 | tee "$out/trainer_gpu_test.log" | tail -3 || status=1
  # Training throughput on the GPU beside PyTorch's (the device image has it) in the same run.
  for precision in float32 bf16; do
    gpu/bin/bench-train-step --device cuda --steps 10 --precision $precision | tee -a "$out/bench-train-step.jsonl" || status=1
  done
  for dtype in float32 bf16; do
    python3 bench/train_step_torch.py --device cuda --dtype $dtype | tee -a "$out/bench-train-step.jsonl" || status=1
  done
fi
if want decode; then
  gpu/bin/inference_test --gtest_filter='FusedTopK*:*DeviceDecoding*' 2>&1 | tee "$out/inference_gpu_test.log" | tail -3 || status=1
  gpu/bin/bench-fused-output | tee "$out/bench-fused-output.jsonl" || status=1
  if [ -f gpu/data/model.tern ]; then
    # End to end on the test books: the host's 16 cores (the reference) against the GPU, plain,
    # fused, top-up, shortlist, bf16; then batch 1 (a budget of one token: a sentence per batch).
    d=(--model gpu/data/model.tern --input gpu/data/test.es --ref gpu/data/test.en --repeats 2)
    gpu/bin/bench-decode "${d[@]}" --threads 16 --beams 1,4 --max_batch_tokens 2048 \
      --configs fused,gpu,gpu+fused,gpu+fused+topup,gpu+fused+shortlist,gpu+fused+clusters,gpu+bf16+fused \
      | tee -a "$out/bench-decode.jsonl" || status=1
    gpu/bin/bench-decode "${d[@]}" --threads 16 --beams 1,4 --max_batch_tokens 1 --max_sentences 80 \
      --configs fused,gpu+fused | tee -a "$out/bench-decode.jsonl" || status=1
  fi
fi
if want host; then
  # The host CPU: the integer GEMM's AVX-512 kernels run where it has AVX-512 (this build machine
  # has none), against the exact reference, then timed against sgemm.
  grep -o 'avx512[a-z_]*' /proc/cpuinfo | sort -u | tr '\n' ' ' | tee "$out/cpu-avx512.txt"; echo
  gpu/bin/int_gemm_test 2>&1 | tee "$out/int_gemm_test.log" | tail -3 || status=1
  for isa in avx2 avx512; do
    TERN_ISA=$isa gpu/bin/bench-gemm | sed "s/^/$isa /" | tee -a "$out/bench-gemm.txt"
  done
fi
exit $status
RUN
chmod +x gpu/run.sh
du -sh gpu

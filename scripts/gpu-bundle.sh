#!/usr/bin/env bash
# Builds the GPU tests and benchmarks (and the integer GEMM's, for the GPU host's AVX-512) with the
# CUDA backend on a machine with the CUDA toolkit (no GPU needed), and packs them, with the Debian
# shared libraries a GPU machine without Tern's packages lacks, into gpu/ (ignored by git). Then
# the checkout with gpu/ in it goes to the GPU machine, which runs gpu/run.sh from its root:
#   scripts/gpu-bundle.sh                       # build + pack every part
#   scripts/gpu-bundle.sh serve decode          # or only what those parts run
#   rsync -a --exclude build ./ gpu-host:tern/  # the checkout, gpu/ included
#   ssh gpu-host 'cd tern && bash gpu/run.sh'   # the default parts (scripts/gpu-run.sh), about
#                                               # 5 minutes; logs and JSON in /tmp/gpu-out
# The decoding parts' model: none packed by default (gpu/run.sh then trains the demo's preset on
# the GPU first and decodes with that); TERN_GPU_MODEL=FILE packs FILE. Every part's programs and
# data take about 24 MiB (xz), so the demo's float32 export (30 MiB) fits; the bundle stops when
# gpu/ would pass TERN_GPU_BUNDLE_MIB (62), to keep the copy small.
# The CUDA libraries (cudart, cuBLAS, NCCL, cuDNN) are not packed: gpu/run.sh finds the GPU
# machine's CUDA 13 ones through /usr/local/cuda and the nvidia Python packages' folders.
set -euo pipefail
model=${TERN_GPU_MODEL:-}
if [ -n "$model" ] && [ ! -f "$model" ]; then
  echo "gpu-bundle: TERN_GPU_MODEL=$model: no such file" >&2
  exit 1
fi
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The programs each part of scripts/gpu-run.sh runs.
declare -A part_targets=(
  [kernels]="cuda_kernels_test tensor_test graph_test optim_cuda_test comm_nccl_test ps_gpu_test"
  [speed]="bench-train-step" [train]="trainer_gpu_test trainer_batch_uploader_test"
  [demo]="trainer_gpu_test tern-export"
  [decode]="inference_test rnn_graph_runtime_equality_test bench-fused-output bench-decode"
  [rnn]="bench-train-step trainer_gpu_test tern-export bench-decode" [ensemble]="bench-decode"
  [cudnn]="models_gru_layer_test graph_test bench-train-step trainer_gpu_test"
  [profile]="bench-train-step" [host]="int_gemm_test bench-gemm"
  [serve]="inference_serve_test tern-serve tern-translate" [serve-join]="tern-serve tern-translate")
parts=("$@")
((${#parts[@]})) || parts=(kernels speed train demo decode rnn ensemble cudnn profile host)
declare -A picked=()
for part in "${parts[@]}"; do
  [ -n "${part_targets[$part]:-}" ] || { echo "gpu-bundle: no part '$part' (parts: ${!part_targets[*]})" >&2; exit 1; }
  for t in ${part_targets[$part]}; do picked[$t]=1; done
done
targets=("${!picked[@]}")
wants_demo_data=0
for part in "${parts[@]}"; do case $part in demo|rnn|cudnn) wants_demo_data=1 ;; esac; done
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA=ON >/dev/null
cmake --build build -j"$(nproc)" --target "${targets[@]}"
rm -rf gpu && mkdir -p gpu/bin gpu/lib
for t in "${targets[@]}"; do cp "build/bin/$t" gpu/bin/; done
# Without their host symbol tables (6 MiB; a crash's stack trace then names fewer functions, the
# kernels' names for Nsight Compute stay).
strip --strip-unneeded gpu/bin/*
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
# Packed with xz (a third of the bytes; unpacked there by run.sh): room for a float32 model.
xz -T0 -6 gpu/bin/* gpu/lib/*
# A slice of the corpus for the GPU training test (prepared here when missing).
corpus=build/corpus/bible
[ -f "$corpus/train.es" ] || scripts/prepare-corpus.sh "$corpus" >/dev/null
mkdir -p gpu/data
for f in train.es train.en; do head -n 1500 "$corpus/$f" > "gpu/data/$f"; done
for f in dev.es dev.en; do head -n 40 "$corpus/$f" > "gpu/data/$f"; done
cp "$corpus/test.es" "$corpus/test.en" gpu/data/
# The serving bench's sentences: every held-out line (test, reserved, dev: 1,091), enough for a
# GPU's burst to last more than a moment.
cat "$corpus/test.es" "$corpus/reserved.es" "$corpus/dev.es" > gpu/data/serve.es
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
if ((wants_demo_data)); then
  mkdir -p gpu/demo-data
  for f in train.es train.en dev.es dev.en; do xz -T0 -6 -c "$corpus/$f" > "gpu/demo-data/$f.xz"; done
fi
[ -z "$model" ] || cp "$model" gpu/data/model.tern
cp scripts/gpu-run.sh gpu/run.sh
chmod +x gpu/run.sh
size=$(du -sm gpu | cut -f1)
max=${TERN_GPU_BUNDLE_MIB:-62}
if ((size > max)); then
  echo "gpu-bundle: gpu/ is $size MiB, more than TERN_GPU_BUNDLE_MIB ($max MiB): pack a smaller" \
    "model (TERN_GPU_MODEL) or none, or raise TERN_GPU_BUNDLE_MIB" >&2
  exit 1
fi
echo "gpu-bundle: gpu/ is $size MiB${model:+, with $model}, for: ${parts[*]}"

#!/usr/bin/env bash
# Installs what Tern needs from Debian 12's packages (and, from PyPI, sacrebleu for the reference
# metric tests, pytest for the Python package's, and with --tests transformers in work/hf-venv for
# the converter's). Safe to run again: it installs only what is missing.
set -euo pipefail
pkgs=(build-essential cmake pkg-config git python3 python3-pip
      libprotobuf-dev protobuf-compiler libgflags-dev libgoogle-glog-dev libgtest-dev libgmock-dev
      libopenblas-dev libsentencepiece-dev sentencepiece libopenmpi-dev openmpi-bin zlib1g-dev
      diatheke sword-text-sparv sword-text-web iproute2 ccache
      clang-14 libclang-rt-14-dev  # libFuzzer for tests/fuzz (scripts/fuzz.sh)
      libboost-dev nlohmann-json3-dev  # tern-serve: Boost.Beast/Asio (header-only) and JSON
      libcpp-httplib-dev  # tern-serve's tests' HTTP client
      curl python3-matplotlib
      python3-dev python3-venv pybind11-dev)  # the Python package (python/, docs/python.md)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
if [ "${TERN_SKIP_PIP:-0}" != 1 ] && ! python3 -c "import sacrebleu" 2>/dev/null; then
  python3 -m pip install -q sacrebleu==2.4.3 2>/dev/null ||
    python3 -m pip install -q --break-system-packages sacrebleu==2.4.3 ||
    echo "install-deps: sacrebleu unavailable; the cross-check tests will skip"
fi
if [ "${TERN_SKIP_PIP:-0}" != 1 ] && ! python3 -c "import pytest" 2>/dev/null; then
  python3 -m pip install -q pytest 2>/dev/null ||
    python3 -m pip install -q --break-system-packages pytest ||
    echo "install-deps: pytest unavailable; the Python package's tests will skip"
fi
# --tests (scripts/test.sh): transformers for the converter's equivalence tests only
# (python/tests/test_convert_hf.py), in a venv of its own: Flax's CPU wheels (PyPI's PyTorch for
# Linux is the CUDA build, ~3 GB).
hf_venv=${TERN_HF_VENV:-$(cd "$(dirname "$0")/.." && pwd)/work/hf-venv}
if [ "${1:-}" = --tests ] && [ "${TERN_SKIP_PIP:-0}" != 1 ] &&
  ! "$hf_venv/bin/python" -c "import transformers, flax" 2>/dev/null; then
  (python3 -m venv "$hf_venv" &&
    "$hf_venv/bin/pip" install -q "transformers[flax]==4.46.3" sentencepiece pytest "numpy<2") ||
    echo "install-deps: transformers unavailable in $hf_venv; the converter's equivalence tests will skip"
fi

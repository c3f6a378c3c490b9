#!/usr/bin/env bash
# multihost_netns_test.sh: a real multi-host Open MPI run on one machine. launch/tern-netns-hosts
# makes a launcher namespace with a bridge and N "host" network namespaces joined to it by veth
# links (addresses in 10.213.8.0/24, which exist only inside these namespaces), then runs
# launch/tern-mpirun there with launch/netns-rsh-agent standing in for ssh, so each rank runs in
# its own namespace and talks TCP over the veth links only (btl tcp,self; btl/oob restricted to
# the test subnet). It runs the comm_mpi_test and ps_mpi_test binaries, bench-ps, and (with
# --corpus) a tiny tern-train.
#
# Run from the repository root (needs root and `ip netns`; exits 77 = skipped otherwise):
#   tests/launch/multihost_netns_test.sh --bin build/bin [--hosts 2] [--netem] [--corpus DIR]
#   --netem        shape every host link to 1 Gbit/s with 2 ms delay, so communication costs
#                  (1 Gbit/s without the delay where the kernel lacks sch_netem)
#   --params N     floats per bench-ps round (default 1048576)
#   --steps N      timed bench-ps rounds (default 5)
#   --corpus DIR   also train a tiny model across the hosts (see tests/e2e/common.sh)
# Each run's namespaces (and with them the links) are removed when it ends.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$ROOT/build/bin NHOSTS=2 NETEM=0 PARAMS=1048576 STEPS=5 CORPUS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$(cd "$2" && pwd); shift 2 ;;
    --hosts) NHOSTS=$2; shift 2 ;;
    --netem) NETEM=1; shift ;;
    --params) PARAMS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --corpus) CORPUS=$2; shift 2 ;;
    *) echo "usage: $0 --bin DIR [--hosts N] [--netem] [--params N] [--steps N] [--corpus DIR]" >&2; exit 2 ;;
  esac
done
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
command -v ip >/dev/null || skip "iproute2 (ip) not installed"
command -v mpirun >/dev/null || skip "mpirun not installed"
for b in comm_mpi_test bench-ps; do [ -x "$BIN/$b" ] || fail "$BIN/$b not built (cmake --build build)"; done

# Each run makes its own hosts (launch/tern-netns-hosts): one rank per namespace, TCP between
# them over the links, which --netem shapes.
SHAPE=()
if [ "$NETEM" = 1 ]; then
  # netem (delay + rate) where the kernel has sch_netem; else a 1 Gbit/s token bucket only.
  if "$ROOT/launch/tern-netns-hosts" --hosts 1 --rate-mbit 1000 --delay-ms 2 -- true > /dev/null 2>&1; then
    SHAPE=(--rate-mbit 1000 --delay-ms 2)
  else
    SHAPE=(--rate-mbit 1000)
    echo "no sch_netem in this kernel: links shaped to 1 Gbit/s without added delay"
  fi
fi
run() {
  "$ROOT/launch/tern-netns-hosts" --hosts "$NHOSTS" "${SHAPE[@]}" -- "$@"
  local rc=$?
  [ $rc = 77 ] && skip "launch/tern-netns-hosts cannot make hosts here"
  return $rc
}

# The ranks really are in different namespaces: each reports its eth0 address.
out=$(run /bin/sh -c 'echo "rank $OMPI_COMM_WORLD_RANK $(hostname) $(ip -4 -o addr show eth0 | awk "{print \$4}")"' 2>&1) ||
  fail "mpirun across namespaces: $out"
echo "$out"
n=$(echo "$out" | grep -c '^rank .* 10\.213\.8\.')
[ "$n" = "$NHOSTS" ] || fail "expected $NHOSTS ranks on distinct namespace addresses, got: $out"
[ "$(echo "$out" | grep '^rank ' | awk '{print $4}' | sort -u | wc -l)" = "$NHOSTS" ] || fail "ranks share an address"

echo "== comm_mpi_test across $NHOSTS hosts"
run "$BIN/comm_mpi_test" --gtest_brief=1 || fail "comm_mpi_test across namespaces"
if [ -x "$BIN/ps_mpi_test" ]; then
  echo "== ps_mpi_test across $NHOSTS hosts"
  run "$BIN/ps_mpi_test" --gtest_brief=1 || fail "ps_mpi_test across namespaces"
fi
echo "== bench-ps across $NHOSTS hosts (--params=$PARAMS)"
run "$BIN/bench-ps" --params="$PARAMS" --steps="$STEPS" || fail "bench-ps across namespaces"

if [ -n "$CORPUS" ]; then
  [ -x "$BIN/tern-train" ] || fail "$BIN/tern-train not built"
  echo "== tiny tern-train across $NHOSTS hosts"
  WORK=$(mktemp -d /tmp/tern-multihost.XXXXXX)
  (
    # common.sh sets up the tiny data and config; its train() is replaced by a multi-host run.
    source "$ROOT/tests/e2e/common.sh"
    run "$BIN/tern-train" --config "$ROOT/configs/bible-small.pbtxt" --model-dir "$WORK/model" \
      --after 10u --set "$TINY" >"$WORK/train.log" 2>&1
  )
  rc=$?
  if grep -q "trains on one rank only" "$WORK/train.log"; then
    echo "tern-train: this build trains on one rank only; multi-host training part not run"
  elif [ $rc != 0 ]; then
    tail -20 "$WORK/train.log" >&2
    fail "tern-train across namespaces (log: $WORK/train.log)"
  else
    tail -3 "$WORK/train.log"
  fi
fi
echo "PASS: multi-host run across ${NHOSTS} namespaces${SHAPE[*]:+ (links: ${SHAPE[*]})}"

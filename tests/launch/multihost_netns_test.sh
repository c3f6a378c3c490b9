#!/usr/bin/env bash
# multihost_netns_test.sh: a real multi-host Open MPI run on one machine. It makes a launcher
# namespace with a bridge and N "host" network namespaces joined to it by veth links (addresses in
# 10.213.7.0/24, which exist only inside these namespaces), then runs launch/tern-mpirun there with
# launch/netns-rsh-agent standing in for ssh, so each rank runs in its own namespace and talks TCP
# over the veth links only (btl tcp,self; btl/oob restricted to the test subnet). It runs the
# comm_mpi_test and ps_mpi_test binaries, bench-ps, and (with --corpus) a tiny tern-train.
#
# Run from the repository root (needs root and `ip netns`; exits 77 = skipped otherwise):
#   tests/launch/multihost_netns_test.sh --bin build/bin [--hosts 2] [--netem] [--corpus DIR]
#   --netem        add `netem delay 2ms rate 1gbit` on every host link, so communication costs
#                  (falls back to `tbf rate 1gbit`, without delay, where sch_netem is missing)
#   --params N     floats per bench-ps round (default 1048576)
#   --steps N      timed bench-ps rounds (default 5)
#   --corpus DIR   also train a tiny model across the hosts (see tests/e2e/common.sh)
# Cleans up its namespaces (and with them the links) on exit.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BIN=$ROOT/build/bin NHOSTS=2 NETEM=0 SHAPE="" PARAMS=1048576 STEPS=5 CORPUS=""
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

P="tmh$$"  # short: namespace names become host names, interface names are at most 15 chars
LNS="${P}l" NS=()
for ((i = 0; i < NHOSTS; i++)); do NS+=("${P}h$i"); done
cleanup() {
  for ns in "${NS[@]}" "$LNS"; do
    # Only processes inside the namespaces this test made (left-over ranks after a failure).
    # shellcheck disable=SC2086  # pids: one word each
    pids=$(ip netns pids "$ns" 2>/dev/null) && [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ip netns add "$LNS" 2>/dev/null || skip "ip netns add not permitted here (container without CAP_SYS_ADMIN?)"
ip -n "$LNS" link set lo up || fail "lo in $LNS"
ip -n "$LNS" link add br0 type bridge || skip "cannot create a bridge in a namespace"
ip -n "$LNS" addr add 10.213.7.1/24 dev br0 && ip -n "$LNS" link set br0 up || fail "bridge set-up"
for i in "${!NS[@]}"; do
  ns=${NS[$i]}
  ip netns add "$ns" || fail "ip netns add $ns"
  ip -n "$ns" link set lo up
  ip -n "$LNS" link add "v$i" type veth peer name eth0 netns "$ns" || skip "cannot create veth links"
  ip -n "$LNS" link set "v$i" master br0 && ip -n "$LNS" link set "v$i" up
  ip -n "$ns" addr add "10.213.7.$((11 + i))/24" dev eth0 && ip -n "$ns" link set eth0 up ||
    fail "address on $ns"
  if [ "$NETEM" = 1 ]; then
    # netem (delay + rate) where the kernel has sch_netem; else a 1 Gbit/s token bucket only.
    if tc -n "$ns" qdisc add dev eth0 root netem delay 2ms rate 1gbit 2>/dev/null; then
      SHAPE="netem delay 2ms rate 1gbit"
    elif tc -n "$ns" qdisc add dev eth0 root tbf rate 1gbit burst 128kb latency 50ms; then
      SHAPE="tbf rate 1gbit (no sch_netem in this kernel: no added delay)"
    else
      skip "tc cannot shape the links (no sch_netem, no sch_tbf)"
    fi
  fi
done
echo "hosts: ${NS[*]} on bridge br0 in $LNS (10.213.7.0/24)${SHAPE:+, links: $SHAPE}"

# Each host gets one rank; everything goes over TCP on the test subnet.
HOSTS=$(printf '%s:1,' "${NS[@]}")
run() {
  ip netns exec "$LNS" "$ROOT/launch/tern-mpirun" --hosts "${HOSTS%,}" --threads 1 \
    --iface 10.213.7.0/24 --rsh-agent "$ROOT/launch/netns-rsh-agent" --mca btl tcp,self \
    --mca plm_rsh_no_tree_spawn 1 -- "$@"
}

# The ranks really are in different namespaces: each reports its eth0 address.
out=$(run /bin/sh -c 'echo "rank $OMPI_COMM_WORLD_RANK $(hostname) $(ip -4 -o addr show eth0 | awk "{print \$4}")"' 2>&1) ||
  fail "mpirun across namespaces: $out"
echo "$out"
n=$(echo "$out" | grep -c '^rank .* 10\.213\.7\.')
[ "$n" = "$NHOSTS" ] || fail "expected $NHOSTS ranks on distinct namespace addresses, got: $out"
[ "$(echo "$out" | awk '{print $4}' | sort -u | wc -l)" = "$NHOSTS" ] || fail "ranks share an address"

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
echo "PASS: multi-host run across ${NHOSTS} namespaces"

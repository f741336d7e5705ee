#!/usr/bin/env bash
# The bare proxy and slidegate measured at the same moment. Two server
# processes share one core (CPU 1, GOMAXPROCS=1 each), and each runs the
# three servers (an origin, the bare proxy and slidegate in front of it).
# A round loads the bare proxy of one process and slidegate of the other,
# with one wrk each on CPU 0, both at once; the next round swaps them, so
# that a process the kernel happens to favour favours each front end in
# half of the rounds. Whatever slows the machine in that second slows both
# (wrk.sh alternates the two in time, and moves by several points from run
# to run on this VM). Server CPU per request, the origin's share included,
# comes from the processes' threads' /proc schedstat: nanoseconds, no
# sampling (a thread that exits during a round would take its time with
# it; the Go runtime keeps its threads). Bounded: about ROUNDS x (DURATION
# + 1) seconds, 127.0.0.1 only.
#   bench/proxyload/pair.sh [ROUNDS] [DURATION] [CONNECTIONS]
# AA=1 puts a second bare proxy where slidegate would be (the method's
# noise floor); VARIANT=headers|decision splits slidegate's cost as in
# wrk.sh. SEPARATE=1 runs each front end in processes of its own (four:
# two bare, two slidegate; a round loads one of each), so that the bare
# proxy's process holds no filled memory store for its garbage collector
# to mark: with both front ends in one process, the collector marks the
# store while the bare proxy is measured too. SLIDEGATE_GOGC=N sets GOGC
# for the slidegate processes alone (with SEPARATE=1), to see what the
# collector's share is; it is not a fair comparison (the bare proxy would
# gain from the same setting).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-8} dur=${2:-2} conns=${3:-32}
out=$(mktemp -d)
procs=() wa='' wb=''
trap 'kill "${procs[@]}" $wa $wb 2>/dev/null || true; rm -rf "$out"' EXIT
go build -o "$out/proxyload" ./proxyload
flags=()
[[ -n ${VARIANT:-} ]] && flags+=(-variant "$VARIANT")
[[ ${AA:-} == 1 ]] && flags+=(-aa)
life=$(( rounds * (dur + 1) + 15 ))s
# start K [-only FRONT]: server process K, its URLs in $out/urls.K.
start() {
  local k=$1; shift
  local genv=()
  [[ ${2:-} == slidegate && -n ${SLIDEGATE_GOGC:-} ]] && genv=("GOGC=$SLIDEGATE_GOGC")
  env GOMAXPROCS=1 "${genv[@]}" taskset -c 1 "$out/proxyload" "${flags[@]}" "$@" -serve "$life" > "$out/urls.$k" &
  procs[k]=$!
}
# bp[r] and sp[r]: the processes (by K) whose bare proxy and slidegate
# round r (1: odd, 2: even) loads.
if [[ ${SEPARATE:-} == 1 ]]; then
  start 1 -only bare; start 2 -only slidegate; start 3 -only slidegate; start 4 -only bare
  bp=('' 1 4) sp=('' 2 3)
else
  start 1; start 2
  bp=('' 1 2) sp=('' 2 1)
fi
for i in $(seq 100); do
  up=1
  for k in "${!procs[@]}"; do
    grep -q '^ready' "$out/urls.$k" 2>/dev/null || up=0
    kill -0 "${procs[k]}" 2>/dev/null || { echo "pair: a server process exited" >&2; exit 1; }
  done
  (( up )) && break
  (( i < 100 )) || { echo "pair: the servers did not start in 10 s" >&2; exit 1; }
  sleep 0.1
done
url() { awk -v n="$1" '$1==n{print $2}' "$out/urls.$2"; }
# cpu PID: nanoseconds on CPU of the process's threads so far.
cpu() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'; }
load() { taskset -c 0 wrk -t 1 -c "$conns" -d "$1" --latency -s proxyload/wrk.lua "$2"; }
# both URL, URL: runs load DURATION on both at once into $out/wrk.a and
# $out/wrk.b and fails when either wrk fails or saw a response other than
# 2xx or 3xx (a 429 or a 502 would make that side look cheaper).
both() {
  load "$1" "$2" > "$out/wrk.a" & wa=$!
  load "$1" "$3" > "$out/wrk.b" & wb=$!
  wait "$wa"; wait "$wb"
  wa='' wb=''
  if grep -q 'Non-2xx' "$out/wrk.a" "$out/wrk.b"; then
    echo "pair: a front end answered with errors:" >&2
    grep -H 'Non-2xx' "$out/wrk.a" "$out/wrk.b" >&2
    exit 1
  fi
}
for n in 1 2; do
  both 1s "$(url bare "${bp[n]}")" "$(url slidegate "${sp[n]}")"
done
echo "pair: $rounds rounds x ${dur}s, $conns connections per front end, both at once; variant ${VARIANT:-none}, A/A ${AA:-0}, separate ${SEPARATE:-0}, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  na=${bp[2 - r % 2]} nb=${sp[2 - r % 2]}
  pa=${procs[na]} pb=${procs[nb]}
  a0=$(cpu $pa) b0=$(cpu $pb)
  both "${dur}s" "$(url bare $na)" "$(url slidegate $nb)"
  a1=$(cpu $pa) b1=$(cpu $pb)
  for f in a b; do
    awk -v n="$f" '/^ +50%/ {p50=$2} /^Requests\/sec/ {rps=$2} /requests in/ {reqs=$1}
      END {printf "%s %s %s %s ", n, p50, rps, reqs}' "$out/wrk.$f"
  done
  echo "$((a1 - a0)) $((b1 - b0))"
done > "$out/runs"
awk '{printf "round: bare p50=%s rps=%s | slidegate p50=%s rps=%s\n", $2, $3, $6, $7}' "$out/runs"
# Per round: slidegate / bare for p50, throughput and CPU per request, then
# the medians. wrk prints latencies as 2.40ms or 950.00us.
awk '
  function us(v) { if (v ~ /us$/) return v+0; if (v ~ /ms$/) return (v+0)*1000; return (v+0)*1e6 }
  { k++; pr[k] = us($6) / us($2); rr[k] = $7 / $3; cr[k] = ($10 / $8) / ($9 / $4); cb[k] = $9 / $4 / 1000 }
  function med(x, m,   i, j, t) { for (i=1;i<=m;i++) for (j=i+1;j<=m;j++) if (x[j]<x[i]) {t=x[i];x[i]=x[j];x[j]=t}
    return (m%2) ? x[(m+1)/2] : (x[m/2]+x[m/2+1])/2 }
  END { printf "median of %d rounds: p50 overhead %+.1f %%, throughput ratio %.3f (loss %.1f %%), server CPU per request %+.1f %% (bare and origin %.1f us)\n",
    k, 100*(med(pr,k)-1), med(rr,k), 100*(1-med(rr,k)), 100*(med(cr,k)-1), med(cb,k) }
' "$out/runs"

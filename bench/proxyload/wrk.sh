#!/usr/bin/env bash
# Cross-check of proxyload with wrk (apt-get install wrk): the same servers
# (origin, bare proxy, slidegate in one process, started by proxyload -serve),
# driven by wrk from a separate process in alternating rounds (bare,
# slidegate, slidegate, bare, ...). Besides wrk's p50 and req/s it reads the
# server process's CPU time per request from /proc, which excludes the load
# generator and moves little when other processes compete for the cores.
# Bounded: ROUNDS x 2 x DURATION seconds, 127.0.0.1 only.
#   bench/proxyload/wrk.sh [ROUNDS] [DURATION] [CONNECTIONS]
# VARIANT=headers|decision and AA=1 split the cost as proxyload's -variant
# and -aa do. PIN=1 runs the servers on CPU 1 (GOMAXPROCS=1) and wrk on CPU 0
# (taskset), so that the generator does not take CPU from the servers.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-6} dur=${2:-3} conns=${3:-32}
out=$(mktemp -d)
go build -o "$out/proxyload" ./proxyload
serve=() gen=()
if [[ ${PIN:-} == 1 ]]; then
  serve=(env GOMAXPROCS=1 taskset -c 1) gen=(taskset -c 0)
fi
flags=()
[[ -n ${VARIANT:-} ]] && flags+=(-variant "$VARIANT")
[[ ${AA:-} == 1 ]] && flags+=(-aa)
"${serve[@]}" "$out/proxyload" "${flags[@]}" -serve $(( rounds * 2 * (dur + 1) + 10 ))s > "$out/urls" &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -rf "$out"' EXIT
until grep -q '^ready' "$out/urls" 2>/dev/null; do sleep 0.1; done
bare=$(awk '$1=="bare"{print $2}' "$out/urls")
sg=$(awk '$1=="slidegate"{print $2}' "$out/urls")
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
run() {
  local t0 t1
  t0=$(ticks)
  "${gen[@]}" wrk -t 1 -c "$conns" -d "${dur}s" --latency -s proxyload/wrk.lua "$1" > "$out/wrk"
  t1=$(ticks)
  awk -v n="$2" -v ticks=$((t1 - t0)) -v hz="$hz" '
    /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} /^Requests\/sec/ {rps=$2} /requests in/ {reqs=$1}
    END {printf "%s p50=%s p99=%s rps=%s cpu_us_per_req=%.1f\n", n, p50, p99, rps, ticks / hz * 1e6 / reqs}' "$out/wrk"
}
wrk -t 1 -c "$conns" -d 1s -s proxyload/wrk.lua "$bare" >/dev/null
wrk -t 1 -c "$conns" -d 1s -s proxyload/wrk.lua "$sg" >/dev/null
echo "wrk: $rounds rounds x 2 x ${dur}s, $conns connections, $(nproc) CPUs, pinned ${PIN:-0}, variant ${VARIANT:-none}, A/A ${AA:-0}, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  if (( r % 2 )); then run "$bare" bare; run "$sg" slidegate; else run "$sg" slidegate; run "$bare" bare; fi
done | tee "$out/runs"
# Per round (bare and slidegate adjacent in time): slidegate / bare, then the
# medians. wrk prints latencies as 2.40ms or 950.00us.
awk '
  function us(v) { if (v ~ /us$/) return v+0; if (v ~ /ms$/) return (v+0)*1000; return (v+0)*1e6 }
  { split($2, a, "="); split($4, c, "="); split($5, u, "=")
    p[$1]=us(a[2]); q[$1]=c[2]+0; cp[$1]=u[2]+0; n[$1]++
    if (n["bare"] == n["slidegate"]) { k++; pr[k]=p["slidegate"]/p["bare"]; rr[k]=q["slidegate"]/q["bare"]; cr[k]=cp["slidegate"]/cp["bare"] } }
  function med(x, m,   i, j, t) { for (i=1;i<=m;i++) for (j=i+1;j<=m;j++) if (x[j]<x[i]) {t=x[i];x[i]=x[j];x[j]=t}
    return (m%2) ? x[(m+1)/2] : (x[m/2]+x[m/2+1])/2 }
  END { printf "median of %d rounds: p50 overhead %+.1f %%, throughput ratio %.3f (loss %.1f %%), server CPU per request %+.1f %%\n", k, 100*(med(pr,k)-1), med(rr,k), 100*(1-med(rr,k)), 100*(med(cr,k)-1) }
' "$out/runs"

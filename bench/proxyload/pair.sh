#!/usr/bin/env bash
# The bare proxy and slidegate measured at the same moment. Two server
# processes share one core (CPU 1, GOMAXPROCS=1 each); each runs its own
# origin and one front end. One wrk per process runs on CPU 0, both at once.
# The kernel gives the two processes equal CPU time, so each front end's
# throughput and p50 follow its own cost per request, and whatever slows
# the machine in that second slows both (wrk.sh alternates the two in time,
# and moves by several points from run to run on this VM). Server CPU per
# request comes from the processes' threads' /proc schedstat (nanoseconds,
# no sampling). Bounded: ROUNDS x (DURATION + 1) seconds, 127.0.0.1 only.
#   bench/proxyload/pair.sh [ROUNDS] [DURATION] [CONNECTIONS]
# AA=1 puts a second bare proxy where slidegate would be (the method's
# noise floor); VARIANT=headers|decision splits slidegate's cost as in
# wrk.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-8} dur=${2:-2} conns=${3:-32}
out=$(mktemp -d)
go build -o "$out/proxyload" ./proxyload
flags=()
[[ -n ${VARIANT:-} ]] && flags+=(-variant "$VARIANT")
[[ ${AA:-} == 1 ]] && flags+=(-aa)
life=$(( rounds * (dur + 1) + 15 ))s
# Both processes run all three servers; a round uses the bare proxy of one
# and slidegate of the other, and the next round swaps them, so that a
# process that gets more of the core than the other (it happens) favours
# each front end in half of the rounds.
env GOMAXPROCS=1 taskset -c 1 "$out/proxyload" "${flags[@]}" -serve "$life" > "$out/urls.1" &
p1=$!
env GOMAXPROCS=1 taskset -c 1 "$out/proxyload" "${flags[@]}" -serve "$life" > "$out/urls.2" &
p2=$!
trap 'kill $p1 $p2 2>/dev/null || true; rm -rf "$out"' EXIT
until grep -q slidegate "$out/urls.1" 2>/dev/null && grep -q slidegate "$out/urls.2" 2>/dev/null; do sleep 0.1; done
url() { awk -v n="$1" '$1==n{print $2}' "$out/urls.$2"; }
# cpu PID: nanoseconds on CPU of all the process's threads so far.
cpu() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f\n", s}'; }
load() { taskset -c 0 wrk -t 1 -c "$conns" -d "$1" --latency -s proxyload/wrk.lua "$2"; }
load 1s "$(url bare 1)" > /dev/null & wa=$!
load 1s "$(url slidegate 2)" > /dev/null & wb=$!
wait $wa $wb
echo "pair: $rounds rounds x ${dur}s, $conns connections per front end, both at once; variant ${VARIANT:-none}, A/A ${AA:-0}, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$rounds"); do
  pa=$p1 na=1 pb=$p2 nb=2
  if (( r % 2 == 0 )); then pa=$p2 na=2 pb=$p1 nb=1; fi
  a0=$(cpu $pa) b0=$(cpu $pb)
  load "${dur}s" "$(url bare $na)" > "$out/wrk.a" & wa=$!
  load "${dur}s" "$(url slidegate $nb)" > "$out/wrk.b" & wb=$!
  wait $wa $wb
  a1=$(cpu $pa) b1=$(cpu $pb)
  for f in a b; do
    awk -v n="$f" '/^ +50%/ {p50=$2} /^Requests\/sec/ {rps=$2} /requests in/ {reqs=$1}
      END {printf "%s %s %s %s ", n, p50, rps, reqs}' "$out/wrk.$f"
  done
  echo "$((a1 - a0)) $((b1 - b0))"
done | tee "$out/runs" | awk '{printf "round: bare p50=%s rps=%s | slidegate p50=%s rps=%s\n", $2, $3, $6, $7}'
# Per round: slidegate / bare for p50, throughput and CPU per request, then
# the medians. wrk prints latencies as 2.40ms or 950.00us.
awk '
  function us(v) { if (v ~ /us$/) return v+0; if (v ~ /ms$/) return (v+0)*1000; return (v+0)*1e6 }
  { k++; pr[k] = us($6) / us($2); rr[k] = $7 / $3; cr[k] = ($10 / $8) / ($9 / $4); cb[k] = $9 / $4 / 1000 }
  function med(x, m,   i, j, t) { for (i=1;i<=m;i++) for (j=i+1;j<=m;j++) if (x[j]<x[i]) {t=x[i];x[i]=x[j];x[j]=t}
    return (m%2) ? x[(m+1)/2] : (x[m/2]+x[m/2+1])/2 }
  END { printf "median of %d rounds: p50 overhead %+.1f %%, throughput ratio %.3f (loss %.1f %%), server CPU per request %+.1f %% (bare %.1f us)\n",
    k, 100*(med(pr,k)-1), med(rr,k), 100*(1-med(rr,k)), 100*(med(cr,k)-1), med(cb,k) }
' "$out/runs"

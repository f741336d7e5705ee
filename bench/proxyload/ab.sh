#!/usr/bin/env bash
# Two builds, or two front ends, measured against each other with wrk: the
# proxyload servers of revision A and of revision B run as two processes
# on CPU 1 (GOMAXPROCS=1 each), wrk runs on CPU 0, and rounds alternate
# between A's front and B's (A B, B A, ...), each process idle while the
# other is loaded. Each round gives B's requests per second over A's; the
# script prints every round and the median and quartiles of the ratios.
#
# Alternating short rounds of two processes resolves differences of a
# percent or two that wrk.sh's medians, minutes apart, do not: the
# machine's drift moves both sides of a round alike. Each process holds
# only what its own front counted, as a deployment would (wrk.sh's single
# process gives the bare proxy slidegate's store to collect too).
#
#   bench/proxyload/ab.sh REV_A REV_B [ROUNDS] [DURATION] [CONNECTIONS]
#
# REV_A and REV_B are git revisions (a path to a built proxyload binary
# works too). FRONT_A and FRONT_B pick the front end loaded in each
# (slidegate, the default, or bare); FLAGS_A and FLAGS_B are more proxyload
# flags (-variant headers, -aa). Examples:
#   ./proxyload/ab.sh main HEAD                              # slidegate, before and after
#   FRONT_A=bare ./proxyload/ab.sh HEAD HEAD                 # issue 3's ratio
#   FRONT_A=bare FRONT_B=bare ./proxyload/ab.sh HEAD HEAD    # A/A: the noise
# Bounded: 2 + ROUNDS x 2 x DURATION seconds of load, 127.0.0.1 only. A
# revision is built in a temporary git worktree, removed again on exit.
set -euo pipefail
self=$(realpath "$0")
[[ $# -ge 2 ]] || { sed -n '2,/^set /p' "$self" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
# A binary given by a relative path is resolved before the cd below.
revs=("$1" "$2")
for i in 0 1; do
  if [[ -f ${revs[i]} && -x ${revs[i]} ]]; then revs[i]=$(realpath "${revs[i]}"); fi
done
cd "$(dirname "$self")/.."
rounds=${3:-16} dur=${4:-2} conns=${5:-32}
out=$(mktemp -d)
pids=() worktrees=()
trap 'set +e; kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null
  for w in "${worktrees[@]}"; do git worktree remove --force "$w" 2>/dev/null; done
  rm -rf "$out"' EXIT

# build REV NAME: the proxyload binary of REV (a git revision, or a built
# binary) at $out/NAME, and what it is in $out/NAME.what.
build() {
  if [[ -f $1 && -x $1 ]]; then
    cp "$1" "$out/$2"
    echo "$1" > "$out/$2.what"
    return
  fi
  local wt="$out/src-$2"
  worktrees+=("$wt")
  git worktree add -q --detach "$wt" "$1"
  (cd "$wt/bench" && go build -o "$out/$2" ./proxyload)
  git worktree remove --force "$wt"
  echo "$1 ($(git rev-parse --short "$1^{commit}"))" > "$out/$2.what"
}
build "${revs[0]}" A
build "${revs[1]}" B

serve=(env GOMAXPROCS=1 taskset -c 1) gen=(taskset -c 0)
# shellcheck disable=SC2086 # FLAGS_* are word lists
"${serve[@]}" "$out/A" ${FLAGS_A:-} -serve $(( rounds * 2 * (dur + 1) + 30 ))s > "$out/A.urls" &
pids+=($!)
# shellcheck disable=SC2086
"${serve[@]}" "$out/B" ${FLAGS_B:-} -serve $(( rounds * 2 * (dur + 1) + 30 ))s > "$out/B.urls" &
pids+=($!)
for i in 0 1; do
  x=$([[ $i == 0 ]] && echo A || echo B)
  for t in $(seq 600); do
    grep -q '^ready' "$out/$x.urls" 2>/dev/null && break
    kill -0 "${pids[i]}" 2>/dev/null || { echo "ab: the servers of $x exited before they were ready" >&2; exit 1; }
    (( t < 600 )) || { echo "ab: the servers of $x were not ready in 60 s" >&2; exit 1; }
    sleep 0.1
  done
done
ua=$(awk -v f="${FRONT_A:-slidegate}" '$1==f {print $2}' "$out/A.urls")
ub=$(awk -v f="${FRONT_B:-slidegate}" '$1==f {print $2}' "$out/B.urls")
[[ -n $ua && -n $ub ]] || { echo "ab: no such front end (FRONT_A=${FRONT_A:-slidegate}, FRONT_B=${FRONT_B:-slidegate})" >&2; exit 1; }
# rps DURATION URL: wrk's requests per second, or a failure when it
# reports none (the servers gone, every request an error).
rps() {
  local v
  v=$("${gen[@]}" wrk -t 1 -c "$conns" -d "$1" -s proxyload/wrk.lua "$2" | awk '/^Requests\/sec/ {print $2}')
  awk -v v="$v" 'BEGIN {exit !(v + 0 > 0)}' || { echo "ab: wrk measured no requests at $2" >&2; return 1; }
  echo "$v"
}
rps 1s "$ua" >/dev/null
rps 1s "$ub" >/dev/null
echo "ab: A=$(cat "$out/A.what") ${FRONT_A:-slidegate}${FLAGS_A:+ $FLAGS_A}, B=$(cat "$out/B.what") ${FRONT_B:-slidegate}${FLAGS_B:+ $FLAGS_B}; $rounds rounds x 2 x ${dur}s, $conns connections, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  if (( r % 2 )); then a=$(rps "${dur}s" "$ua"); b=$(rps "${dur}s" "$ub"); else b=$(rps "${dur}s" "$ub"); a=$(rps "${dur}s" "$ua"); fi
  echo "round $r: A $a req/s, B $b req/s, B/A $(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", b/a}')"
done | tee "$out/rounds"
awk '{r[NR] = $NF + 0}
  END {
    n = NR
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (r[j] < r[i]) {t = r[i]; r[i] = r[j]; r[j] = t}
    med = (n % 2) ? r[(n + 1) / 2] : (r[n / 2] + r[n / 2 + 1]) / 2
    q = int((n + 3) / 4) # ceil(n/4): the quartiles by nearest rank from each end
    printf "B/A requests per second: median %.3f, quartiles %.3f-%.3f, %d rounds\n", med, r[q], r[n + 1 - q], n
  }' "$out/rounds"

#!/usr/bin/env bash
# User-space instructions per proxied request, bare proxy against
# slidegate, counted by valgrind's cachegrind rather than timed: the counts
# hardly move with what else the machine does, so small changes show that
# wrk.sh and pair.sh cannot resolve. Kernel work (the sockets, most of a
# request's time) is not counted, so the ratio here is larger than the
# CPU-time ratio.
#
# The proxyload servers (origin, bare proxy, slidegate; GOMAXPROCS=1) run
# under cachegrind while proxyload -drive sends a fixed number of requests
# to one front end: N in one run, 2N in another, so that start-up, the
# warm-up and idle time cancel in the difference. Per request, per front
# end: (Ir(2N) - Ir(N)) / N; then the functions whose count per request
# grew most from the bare proxy to slidegate, in groups. Under valgrind
# the CPU has no SHA instructions, so SHA-256 runs its AVX2 code (more
# instructions than the SHA-NI code a real run uses).
#
# Bounded: four server runs, two at a time, 127.0.0.1 only; about 2
# minutes for N=4000 here.
#   bench/proxyload/instr.sh [N] [CONNECTIONS]
# VARIANT=headers|decision and AA=1 apply as in pair.sh. DRIVE_KEYS=K sends
# the load on the first K of the 1000 configured keys (how much the store
# holds); GOGC and other Go settings in the environment reach the servers.
# CACHE=1 also simulates this host's per-core caches (48 KiB L1d, 1 MiB
# L2, 64-byte lines; valgrind's "LL" is the L2 here) and prints the data
# misses per request in each, in all and by function: how many lines a
# request brings in, which timing here cannot resolve. The collector's
# misses move by several per request between runs (how many cycles fall
# in each); those of slidegate's own functions by about 0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-4000} conns=${2:-4}
command -v valgrind >/dev/null || { echo "instr: needs valgrind (apt-get install valgrind)" >&2; exit 1; }
out=$(mktemp -d)
pids=()
# Every server's pid goes to $out/servers: a run that fails (or the script
# stopped) leaves none behind.
trap 'set +e; kill "${pids[@]}" $(cat "$out/servers" 2>/dev/null) 2>/dev/null; rm -rf "$out"' EXIT
go build -o "$out/proxyload" ./proxyload
sim=(--cache-sim=no)
[[ ${CACHE:-} == 1 ]] && sim=(--cache-sim=yes --I1=32768,8,64 --D1=49152,12,64 --LL=1048576,16,64)
flags=()
[[ -n ${VARIANT:-} ]] && flags+=(-variant "$VARIANT")
[[ ${AA:-} == 1 ]] && flags+=(-aa)

# run NAME FRONT COUNT: the servers under cachegrind, COUNT requests (after
# 200 to warm up) to FRONT (bare or slidegate), then SIGTERM.
run() {
  local d="$out/$1"
  mkdir -p "$d"
  GOMAXPROCS=1 valgrind --tool=cachegrind "${sim[@]}" --cachegrind-out-file="$d/cg" \
    "$out/proxyload" "${flags[@]}" -serve 10m > "$d/urls" 2> "$d/vg" &
  local vp=$!
  echo "$vp" >> "$out/servers"
  trap 'kill -TERM '"$vp"' 2>/dev/null || true' EXIT
  for i in $(seq 600); do
    grep -q '^ready' "$d/urls" 2>/dev/null && break
    kill -0 "$vp" 2>/dev/null || { echo "instr: the servers exited" >&2; cat "$d/vg" >&2; return 1; }
    (( i < 600 )) || { echo "instr: the servers did not start in 60 s" >&2; return 1; }
    sleep 0.1
  done
  local u
  u=$(awk -v f="$2" '$1==f{print $2}' "$d/urls")
  "$out/proxyload" -drive "$u" -keys "${DRIVE_KEYS:-1000}" -n 200 -c "$conns"
  "$out/proxyload" -drive "$u" -keys "${DRIVE_KEYS:-1000}" -n "$3" -c "$conns"
  kill -TERM "$vp"
  wait "$vp"
  cg_annotate --show-percs=no --threshold=0 "$d/cg" |
    awk '/PROGRAM TOTALS/ {gsub(",", ""); print $1 > "'"$d/total"'"
        if (NF >= 11) print $5 + $8 > "'"$d/d1"'"; if (NF >= 11) print $6 + $9 > "'"$d/ll"'"}
      /file:function/ {f=1; next}
      f && /^-/ {if (n) f=0; next}
      f && /^ *[0-9][0-9,]* / && (i = index($0, " /")) {
        n++; fn=substr($0, i+1); sub(/ .*/, "", fn); sub(/^.*:/, "", fn)
        gsub(",", ""); a[fn]+=$1; m[fn]+=$6+$9} # $6, $9: L2 misses, when simulated
      END {for (k in a) print k "\t" a[k] "\t" m[k]}' | sort > "$d/fn"
}

for front in bare slidegate; do
  run "$front.1" "$front" "$n" & pids=($!)
  run "$front.2" "$front" "$((2 * n))" & pids+=($!)
  for p in "${pids[@]}"; do wait "$p"; done
  pids=()
done

per() { echo $(( ($(cat "$out/$1.2/total") - $(cat "$out/$1.1/total")) / n )); }
b=$(per bare) s=$(per slidegate)
echo "instr: $n and $((2 * n)) requests, $conns connections, ${DRIVE_KEYS:-1000} keys, variant ${VARIANT:-none}, A/A ${AA:-0}, GOGC ${GOGC:-100}"
awk -v b="$b" -v s="$s" 'BEGIN {printf "instructions per request: bare %d, slidegate %d, %+.1f %% (%+d)\n", b, s, 100*(s/b-1), s-b}'
if [[ ${CACHE:-} == 1 ]]; then
  # Per request as (misses(2N) - misses(N)) / N, in hundredths: a few
  # lines per request is the size of a change.
  for c in d1 ll; do
    b=$(( ($(cat "$out/bare.2/$c") - $(cat "$out/bare.1/$c")) * 100 / n ))
    s=$(( ($(cat "$out/slidegate.2/$c") - $(cat "$out/slidegate.1/$c")) * 100 / n ))
    awk -v c="$c" -v b="$b" -v s="$s" 'BEGIN {printf "%s data misses per request: bare %.2f, slidegate %.2f (%+.2f)\n", (c == "d1" ? "L1d" : "L2"), b/100, s/100, (s-b)/100}'
  done
  echo "largest functions by L2 data misses per request (slidegate minus bare):"
  join -t $'\t' -a1 -a2 -e0 -o 0,1.3,2.3 "$out/slidegate.2/fn" "$out/slidegate.1/fn" > "$out/sm"
  join -t $'\t' -a1 -a2 -e0 -o 0,1.3,2.3 "$out/bare.2/fn" "$out/bare.1/fn" > "$out/bm"
  join -t $'\t' -a1 -a2 -e0 -o 0,1.2,1.3,2.2,2.3 "$out/sm" "$out/bm" |
    awk -F'\t' -v n="$n" '{d = (($2 - $3) - ($4 - $5)) / n; if (d >= 0.3 || d <= -0.3) printf "  %8.2f  %s\n", d, $1}' |
    sort -nr | head -20
fi
# Per function: slidegate's growth per request minus the bare proxy's.
join -t $'\t' -a1 -a2 -e0 -o 0,1.2,2.2 "$out/slidegate.2/fn" "$out/slidegate.1/fn" > "$out/s"
join -t $'\t' -a1 -a2 -e0 -o 0,1.2,2.2 "$out/bare.2/fn" "$out/bare.1/fn" > "$out/b"
join -t $'\t' -a1 -a2 -e0 -o 0,1.2,1.3,2.2,2.3 "$out/s" "$out/b" |
  awk -F'\t' -v n="$n" '
    { d = (($2 - $3) - ($4 - $5)) / n
      g = "other"
      if ($1 ~ /slidegate/) g = "slidegate (limiter, store, window, httpapi)"
      else if ($1 ~ /sha256|strconv|netip|hex\./) g = "SHA-256, number formatting, IP parsing"
      else if ($1 ~ /^runtime\.(scan|tryDefer|findObject|gc|wb|greyobject|markBits|spanOf|typePointers|extractHeap|bgsweep|sweep|\(\*gcWork|\(\*sweepLocked|\(\*gcBits|\(\*spanSet|\(\*mspan)/) g = "garbage collection"
      else if ($1 ~ /^runtime\.(malloc|nextFree|newobject|memclr|slicebytetostring|concatstring)/ || $1 ~ /writeHeapBits/) g = "allocation"
      else if ($1 ~ /Header|byteReplacer|pdqsort|insertionSort|cmpbody|bufio|Iter|mapIter|putSlot|mapassign|mapaccess|getWithoutKey|TrimString|WriteHeader/) g = "header maps and their serialization (net/http, runtime maps)"
      grp[g] += d; fn[$1] = d }
    END {
      print "by group (instructions per request, slidegate minus bare):"
      for (k in grp) printf "  %8.0f  %s\n", grp[k], k | "sort -nr"
      close("sort -nr")
      print "largest functions:"
      for (k in fn) if (fn[k] >= 150 || fn[k] <= -150) printf "  %8.0f  %s\n", fn[k], k | "sort -nr | head -25"
    }'

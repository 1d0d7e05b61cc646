#!/bin/sh
# A fuzz campaign: tests/fuzz/run-campaign.sh BUILD_DIR SECONDS [gguf|jinja|request]
#
# BUILD_DIR is a clang build configured with -DFISH_FUZZ=ON that has the
# target's programs built.
#   gguf (default): fuzz_gguf and make_fuzz_seeds. The seeds (tiny models and
#     cut-down vocabularies, make_fuzz_seeds) are written to
#     BUILD_DIR/fuzz-seeds; the corpus the fuzzer grows lives in FISH_FUZZ_DIR
#     (default /var/cache/fish-ci/fuzz/corpus, kept between CI runs on one
#     machine, or ~/.cache/fish/fuzz/corpus where that cannot be made); the
#     committed regressions/*.gguf are read as inputs too.
#   jinja: fuzz_jinja, the chat templates. The seeds are the real templates
#     of the shared models folder (models/templates, read in place: the
#     build's FISH_SHARED_DIR); the corpus lives in FISH_FUZZ_JINJA_DIR
#     (default /var/cache/fish-ci/fuzz-jinja/corpus, or
#     ~/.cache/fish/fuzz-jinja/corpus).
#   request: fuzz_request, fish serve's request bodies. Seeds: request-seeds/;
#     corpus in FISH_FUZZ_REQUEST_DIR (default
#     /var/cache/fish-ci/fuzz-request/corpus).
# FISH_FUZZ_JOBS (default 1) fuzzers run side by side on the shared corpus.
#
# Prints the executions of this run and the running total over every campaign
# of the target recorded in its corpus's ../executions.log (one line per
# campaign: date, seconds, jobs, executions, result); exits non-zero on a
# crash, a hang (-timeout=10 s), an allocation past 2 GB or a sanitizer report,
# naming the input file it saved (copy it to tests/fuzz/regressions/ once fixed).
set -eu
[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: $0 BUILD_DIR SECONDS [gguf|jinja|request]" >&2; exit 2; }
build=$(cd "$1" && pwd)
secs=$2
target=${3:-gguf}
src=$(cd "$(dirname "$0")" && pwd)
jobs=${FISH_FUZZ_JOBS:-1}
case "$target" in
  gguf) dir=fuzz override=${FISH_FUZZ_DIR:-} progs="fuzz_gguf make_fuzz_seeds" max_len=65536 ;;
  jinja) dir=fuzz-jinja override=${FISH_FUZZ_JINJA_DIR:-} progs="fuzz_jinja" max_len=16384 ;;
  request) dir=fuzz-request override=${FISH_FUZZ_REQUEST_DIR:-} progs="fuzz_request" max_len=65536 ;;
  *) echo "$0: unknown target '$target' (gguf, jinja, request)" >&2; exit 2 ;;
esac
# The CI machine's cache (root); elsewhere the user's.
default=/var/cache/fish-ci/$dir/corpus
mkdir -p "$default" 2>/dev/null || default=${XDG_CACHE_HOME:-$HOME/.cache}/fish/$dir/corpus
corpus=${override:-$default}
state=$(dirname "$corpus")
fuzzer=$build/bin/fuzz_$target
for p in $progs; do
  [ -x "$build/bin/$p" ] || { echo "$0: $build/bin/$p is not built (cmake -DFISH_FUZZ=ON with clang, targets $progs)" >&2; exit 2; }
done
mkdir -p "$corpus" "$state/artifacts"
if [ "$target" = gguf ]; then
  seeds=$build/fuzz-seeds
  rm -rf "$seeds"
  "$build/bin/make_fuzz_seeds" --seeds "$seeds" >/dev/null
  inputs="$seeds $src/regressions"
elif [ "$target" = request ]; then
  seeds=$src/request-seeds
  inputs=$seeds
else
  shared=$(sed -n 's/^FISH_SHARED_DIR:PATH=//p' "$build/CMakeCache.txt")
  seeds=$shared/models/templates
  [ -d "$seeds" ] || { echo "$0: no chat templates at $seeds (FISH_SHARED_DIR)" >&2; exit 2; }
  inputs=$seeds
fi
logs=$build/fuzz-logs-$target
rm -rf "$logs"
mkdir -p "$logs"
echo "== fuzz_$target: $secs s, $jobs job(s), corpus $corpus ($(ls "$corpus" | wc -l) files), $(ls "$seeds" | wc -l) seeds"

# -max_len: every seed and regression file is under 64 KB, every real chat
# template under 16 KB (larger inputs only slow the runs down); -rss_limit_mb
# also caps a single allocation (malloc_limit_mb defaults to it).
set +e
(cd "$logs" && FISH_GPU=0 ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
  "$fuzzer" -max_len=$max_len -timeout=10 -rss_limit_mb=2048 -max_total_time="$secs" -print_final_stats=1 \
    -dict="$src/$target.dict" -artifact_prefix="$state/artifacts/" -jobs="$jobs" -workers="$jobs" \
    "$corpus" $inputs >main.log 2>&1)
rc=$?
set -e
# Each job (a fuzzer process) writes fuzz-N.log in $logs; main.log repeats them.
execs=0
for f in "$logs"/fuzz-*.log; do
  [ -f "$f" ] || continue
  n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$f" | tail -1)
  [ -n "$n" ] && execs=$((execs + n))
done
crashes=$(grep -ho "Test unit written to [^ ]*" "$logs"/fuzz-*.log | sed 's/Test unit written to //' | sort -u)
[ "$rc" -eq 0 ] && [ -z "$crashes" ] && result=ok || result="finding (exit $rc)"
printf '%s %s %s %s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$secs" "$jobs" "$execs" "$result" >>"$state/executions.log"
total=$(awk '{ s += $4 } END { print s + 0 }' "$state/executions.log")
runs=$(wc -l <"$state/executions.log")
echo "== fuzz_$target: $execs executions in $secs s ($((execs / (secs > 0 ? secs : 1))) /s), corpus $(ls "$corpus" | wc -l) files; $total executions over $runs campaigns ($state/executions.log)"
if [ -n "$crashes" ] || [ "$rc" -ne 0 ]; then
  for f in "$logs"/fuzz-*.log; do
    grep -q "ERROR: \|==ERROR\|runtime error\|fish fuzz:" "$f" && { echo "-- $f"; grep -m1 -B2 -A40 "ERROR: \|==ERROR\|runtime error\|fish fuzz:" "$f"; }
  done
  [ -n "$crashes" ] || crashes="none saved, see $logs"
  echo "== fuzz_$target: FINDING; input(s): $crashes" >&2
  exit 1
fi

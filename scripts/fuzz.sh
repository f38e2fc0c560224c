#!/usr/bin/env bash
# Coverage-guided fuzzing of atoll's parsers of outside input (docs/fuzzing.md).
#
#   bash scripts/fuzz.sh [--runs N | --time S | --smoke] [TARGET...]
#
#   --runs N   run each target for N executions
#   --time S   run each target for S seconds (default: --time 60)
#   --smoke    quick check for CI: build every target, run each over its
#              seed corpus plus 5000 executions, in a throw-away corpus
#   TARGET     config proto netdiag_wire procfs cgroup_stats state
#              proc_connector
#              (default: all of them)
#
# Installs cargo-fuzz if missing (it needs the nightly toolchain), builds the
# targets with libFuzzer, debug assertions and overflow checks (no
# sanitizer: the parsers are safe Rust), and runs them one after the other,
# one worker each, under `nice -n 15`. New corpus entries go to
# fuzz/corpus/TARGET (not committed; the committed seeds are in
# fuzz/seeds/TARGET), crashes to fuzz/artifacts/TARGET. Prints one line per
# target and exits non-zero if any target crashed, panicked, timed out
# (2 s per input) or ran out of memory (2048 MB).
#
# Environment: FUZZ_EXTRA_ARGS is appended to every libFuzzer command line.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

all_targets=(config proto netdiag_wire procfs cgroup_stats state proc_connector)
mode="time"
limit=60
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) mode=runs; limit=${2:?--runs needs a number}; shift 2 ;;
    --time) mode="time"; limit=${2:?--time needs seconds}; shift 2 ;;
    --smoke) mode=smoke; limit=""; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *)
      if [[ " ${all_targets[*]} " != *" $1 "* ]]; then
        echo "fuzz.sh: unknown target $1 (known: ${all_targets[*]})" >&2
        exit 2
      fi
      targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  echo "fuzz.sh: the nightly toolchain is needed (rustup toolchain install nightly)" >&2
  exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  nice -n 15 cargo install cargo-fuzz --locked
fi

# Always fuzz/target, whatever CARGO_TARGET_DIR says: the instrumented build
# must not mix with the workspace's.
target_dir="$root/fuzz/target"
# One build for every target (they share all but their last link step).
echo "== cargo fuzz build"
build_start=$(date +%s)
(cd fuzz && nice -n 15 cargo +nightly fuzz build -s none --target-dir "$target_dir")
echo "   built in $(( $(date +%s) - build_start ))s"
bin_dir="$target_dir/x86_64-unknown-linux-gnu/release"

status=0
summary=()
for t in "${targets[@]}"; do
  seeds="$root/fuzz/seeds/$t"
  artifacts="$root/fuzz/artifacts/$t"
  mkdir -p "$artifacts"
  if [ "$mode" = smoke ]; then
    corpus=$(mktemp -d)
    limit_args=(-runs=5000)
  else
    corpus="$root/fuzz/corpus/$t"
    mkdir -p "$corpus"
    if [ "$mode" = runs ]; then limit_args=(-runs="$limit"); else limit_args=(-max_total_time="$limit"); fi
  fi
  log="$artifacts/last-run.log"
  before=$(find "$artifacts" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
  start=$(date +%s)
  cmd=(nice -n 15 "$bin_dir/$t" "${limit_args[@]}" -timeout=2 -rss_limit_mb=2048
       -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "$seeds")
  # shellcheck disable=SC2206 # FUZZ_EXTRA_ARGS is a list of flags
  [ -z "${FUZZ_EXTRA_ARGS:-}" ] || cmd+=(${FUZZ_EXTRA_ARGS})
  echo "== $t: ${cmd[*]}"
  set +e
  "${cmd[@]}" >"$log" 2>&1
  rc=$?
  set -e
  secs=$(( $(date +%s) - start ))
  [ "$mode" != smoke ] || rm -rf "$corpus"
  after=$(find "$artifacts" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' -o -name 'leak-*' \) | wc -l)
  crashes=$(( after - before ))
  if [ "$rc" != 0 ] && [ "$crashes" = 0 ]; then crashes=1; fi
  # A run that crashes early may print none of these: no match is not an
  # error here.
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  cov=$( (grep -o 'cov: [0-9]*' "$log" || true) | tail -1 | cut -d' ' -f2)
  ft=$( (grep -o 'ft: [0-9]*' "$log" || true) | tail -1 | cut -d' ' -f2)
  line=$(printf '%-13s execs=%-10s exec/s=%-7s cov=%-5s ft=%-6s rss_mb=%-5s secs=%-5s crashes=%s' \
    "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${rss:-?}" "$secs" "$crashes")
  echo "$line"
  summary+=("$line")
  if [ "$crashes" != 0 ]; then
    status=1
    echo "   FAILED (exit $rc): see $log and $artifacts/"
    grep -m5 -E 'panicked|ERROR: libFuzzer|SUMMARY' "$log" | sed 's/^/   /' || true
  fi
done

echo "== summary ($mode${limit:+ $limit})"
printf '%s\n' "${summary[@]}"
exit "$status"

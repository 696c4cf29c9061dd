#!/bin/bash
# Runs every fuzz target built by tests/fuzz/build.sh for a bounded time, one at a time
# (-jobs are not used: the machines are shared), and prints a summary line per target:
# executions, coverage, corpus size and whether it found anything.
#
# The committed seed corpus (tests/fuzz/corpus/<target>) is read but never written:
# new inputs go to OUT_DIR/corpus/<target>, crashes to OUT_DIR/artifacts/<target>/. A
# crash fails the run; fix it, then commit the crashing input into the seed corpus so
# the corpus replay test in `make test` keeps it fixed (see docs/reliability.md).
#
# Usage: tests/fuzz/run.sh OUT_DIR SECONDS_PER_TARGET [TARGET...]
set -uo pipefail

out=${1:?usage: tests/fuzz/run.sh OUT_DIR SECONDS [TARGET...]}
seconds=${2:?usage: tests/fuzz/run.sh OUT_DIR SECONDS [TARGET...]}
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(ring_reader checkpoint_decode megatron_idx json_scan s3_xml mds parquet)

# Ring inputs carry both whole segments (data: header, descriptors, slots; cursors: cursor
# header, reader table); the largest seed (4 slots, 2 readers) is 32788 bytes.
declare -A MAX_LEN=([ring_reader]=40960 [checkpoint_decode]=4096 [megatron_idx]=4096
                    [json_scan]=4096 [s3_xml]=4096 [mds]=4096 [parquet]=4096)
failed=()
summary=()
for t in "${targets[@]}"; do
  bin="$out/${t}_fuzzer"
  [ -x "$bin" ] || { echo "run.sh: $bin not built (tests/fuzz/build.sh)" >&2; exit 1; }
  mkdir -p "$out/corpus/$t" "$out/artifacts/$t"
  log="$out/$t.log"
  echo "fuzzing $t for ${seconds}s (log: $log)"
  "$bin" -max_total_time="$seconds" -max_len="${MAX_LEN[$t]}" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$out/artifacts/$t/" \
    "$out/corpus/$t" "$root/tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  corpus=$(ls "$out/corpus/$t" | wc -l)
  found=$(ls "$out/artifacts/$t" | tr '\n' ' ')
  if [ $rc -ne 0 ]; then
    failed+=("$t")
    summary+=("$t: FAILED (exit $rc) after ${execs:-?} executions, ${cov:-cov: ?}; artifacts: ${found:-none}; see $log")
  else
    summary+=("$t: ${execs:-?} executions in ${seconds}s, ${cov:-cov: ?}, $corpus new corpus inputs, no findings")
  fi
done
echo
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz findings in: ${failed[*]}" >&2
  exit 1
fi

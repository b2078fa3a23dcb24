#!/usr/bin/env bash
# The fault runs (docs/benchmarks.md, "Fault runs"), over and over: every test that injects a
# fault through the real binary — a full disk, locks at start and at save, two writers, kill -9 in
# bursts, vector tables deleted or damaged between runs and under a running server, empty and
# half-made databases, two quick saves — ROUNDS times (default 10), two at a time, as
# `cargo test` runs them. Prints how many rounds each passed and the median time of a round;
# exits 1 if any run failed. Usage: scripts/soak-faults.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh
ensure_toolchain
ensure_models
ROUNDS=${1:-10}

LSP=(
  a_save_while_another_process_locks_the_database_is_kept_shown_and_lands
  a_server_started_under_another_process_lock_waits_says_so_and_starts_once_it_goes
  a_save_on_a_full_disk_is_kept_shown_and_lands_once_space_is_freed
  lode_index_beside_lode_serve_fails_no_write_of_either
  kill_9_in_bursts_loses_no_saved_note
  a_damaged_vector_table_is_told_moved_aside_and_rebuilt
  a_vector_table_lost_under_a_running_server_is_found_told_and_rebuilt
  two_quick_saves_keep_both_acknowledged_versions
  opening_the_stores_never_blocks_the_message_loop
)
CLI=(
  a_full_disk_is_named_searched_read_only_and_recovered_from
  a_deleted_or_damaged_vector_table_is_said_and_mended
  empty_foreign_and_half_made_databases_are_named_and_kept
  corrupt_database_is_named_and_kept
  crash_mid_index_leaves_no_half_indexed_note
)
STORE=(
  two_writers_creating_the_same_notes_never_collide
)

cargo test --locked -q -p lode --test lsp --test cli --no-run 2>/dev/null
cargo test --locked -q -p lode-store --test store --no-run 2>/dev/null

declare -A passed failed
times=()
log=$(mktemp)
for r in $(seq "$ROUNDS"); do
  start=$(date +%s.%N)
  {
    cargo test --locked -p lode --test lsp -- --exact "${LSP[@]}" || true
    cargo test --locked -p lode --test cli -- --exact "${CLI[@]}" || true
    cargo test --locked -p lode-store --test store -- --exact "${STORE[@]}" || true
  } >"$log" 2>&1
  end=$(date +%s.%N)
  times+=("$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.1f", b - a}')")
  while read -r name verdict; do
    if [[ $verdict == ok ]]; then passed[$name]=$(( ${passed[$name]:-0} + 1 )); else failed[$name]=$(( ${failed[$name]:-0} + 1 )); fi
  done < <(sed -n 's/^test \([a-z0-9_]*\) \.\.\. \(ok\|FAILED\)$/\1 \2/p' "$log")
  ran=$(grep -c '^test [a-z0-9_]* \.\.\. ' "$log" || true)
  echo "round $r/$ROUNDS: $ran runs, $(grep -c '\.\.\. FAILED$' "$log" || true) failed, ${times[-1]%.*} s" >&2
  if grep -q '\.\.\. FAILED$' "$log"; then cp "$log" "target/soak-faults-round-$r.log"; echo "  (log: target/soak-faults-round-$r.log)" >&2; fi
done
rm -f "$log"

median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
printf '%-85s %s\n' "fault run" "passed"
status=0
for t in "${LSP[@]}" "${CLI[@]}" "${STORE[@]}"; do
  p=${passed[$t]:-0}
  printf '%-85s %s/%s\n' "$t" "$p" "$ROUNDS"
  [[ $p == "$ROUNDS" ]] || status=1
done
printf 'median round: %.1f s over %s rounds\n' "$median" "$ROUNDS"
exit $status

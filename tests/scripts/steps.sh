# Sourced by .ci/run and the test scripts. `step NAME CMD...` runs CMD and appends
# "NAME<TAB>seconds<TAB>rc" to $FUSEDNORM_STEPS; the outermost script (the one that created the
# file) prints the table of every step, with the total, when it exits (also on failure).
# A failing step stops the script (set -e) after its line is recorded.
# `bg_start NAME LOG CMD...` runs CMD in the background (its own process group, output to LOG; the
# steps CMD records land in the table as they end); `bg_wait NAME` joins it, prints LOG and returns
# CMD's status. A script that exits before joining stops what it started.
_steps_owner=0
if [ -z "${FUSEDNORM_STEPS:-}" ]; then
  FUSEDNORM_STEPS=$(mktemp /tmp/fusednorm-steps.XXXXXX)
  export FUSEDNORM_STEPS
  _steps_owner=1
  _steps_t0=$(date +%s)
fi
declare -A _steps_bg=() _steps_bg_log=()
_steps_exit() {
  local rc=$? p
  for p in "${_steps_bg[@]}"; do kill -- "-$p" 2>/dev/null || true; done
  if [ $_steps_owner = 1 ]; then steps_table; fi
  return $rc
}
trap _steps_exit EXIT

step() {
  local name=$1 t0 rc=0
  shift
  t0=$(date +%s)
  echo "==== step: $name ($(date -u +%H:%M:%S))"
  "$@" || rc=$?
  printf '%s\t%d\t%d\n' "$name" "$(($(date +%s) - t0))" "$rc" >>"$FUSEDNORM_STEPS"
  return $rc
}

steps_table() {
  if [ -s "$FUSEDNORM_STEPS" ]; then
    echo
    echo "==== steps (wall-clock seconds on $(nproc) cores)"
    awk -F'\t' '{ printf "  %-60s %6d s%s\n", $1, $2, ($3 == 0 ? "" : "   FAILED (rc " $3 ")"); t += $2 }
                END { printf "  %-60s %6d s (%.1f min)\n", "sum (nested and background steps overlap)", t, t / 60 }' \
      "$FUSEDNORM_STEPS"
    local wall=$(($(date +%s) - _steps_t0))
    printf '  %-60s %6d s (%.1f min)\n' "wall clock" "$wall" "$(awk -v w=$wall 'BEGIN { printf "%.1f", w / 60 }')"
  fi
  rm -f "$FUSEDNORM_STEPS"
}

bg_start() {
  local name=$1 log=$2
  shift 2
  echo "==== background: $name ($(date -u +%H:%M:%S)), output in $log"
  setsid "$@" >"$log" 2>&1 &
  _steps_bg[$name]=$!
  _steps_bg_log[$name]=$log
}

bg_wait() {
  local name=$1 rc=0
  wait "${_steps_bg[$name]}" || rc=$?
  unset "_steps_bg[$name]"
  echo "==== background: $name ended (rc $rc); its output:"
  cat "${_steps_bg_log[$name]}"
  return $rc
}

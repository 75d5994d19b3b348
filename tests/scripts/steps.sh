# Sourced by .ci/run and the test scripts. `step NAME CMD...` runs CMD and appends
# "NAME<TAB>seconds<TAB>rc" to $FUSEDNORM_STEPS; the outermost script (the one that created the
# file) prints the table of every step, their sum and the wall clock, when it exits (also on
# failure).
# A failing step stops the script (set -e) after its line is recorded.
if [ -z "${FUSEDNORM_STEPS:-}" ]; then
  FUSEDNORM_STEPS=$(mktemp /tmp/fusednorm-steps.XXXXXX)
  export FUSEDNORM_STEPS
  _steps_t0=$(date +%s)
  trap steps_table EXIT
fi

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
    awk -F'\t' -v wall=$(($(date +%s) - _steps_t0)) '
      { printf "  %-60s %6d s%s\n", $1, $2, ($3 == 0 ? "" : "   FAILED (rc " $3 ")"); t += $2 }
      END { printf "  %-60s %6d s (%.1f min)\n", "sum (a nested step is counted with its parent)", t, t / 60
            printf "  %-60s %6d s (%.1f min)\n", "wall clock", wall, wall / 60 }' "$FUSEDNORM_STEPS"
  fi
  rm -f "$FUSEDNORM_STEPS"
}

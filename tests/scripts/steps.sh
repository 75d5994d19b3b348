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

# CPU seconds (user + system) of the finished children of shell $1 so far: cutime and cstime of
# /proc/$1/stat (fields 16 and 17, clock ticks).
_children_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%d", ($14 + $15) / hz + 0.5 }' "/proc/$1/stat"; }

step() {
  local name=$1 t0 c0 rc=0 me=$BASHPID  # the shell running the step (a background one too)
  shift
  t0=$(date +%s)
  c0=$(_children_cpu "$me")
  echo "==== step: $name ($(date -u +%H:%M:%S))"
  "$@" || rc=$?
  printf '%s\t%d\t%d\t%d\n' "$name" "$(($(date +%s) - t0))" "$rc" "$(($(_children_cpu "$me") - c0))" >>"$FUSEDNORM_STEPS"
  return $rc
}

steps_table() {
  if [ -s "$FUSEDNORM_STEPS" ]; then
    echo
    echo "==== steps (wall-clock seconds on $(nproc) cores; cpu: user + system seconds of the step's processes)"
    awk -F'\t' -v wall=$(($(date +%s) - _steps_t0)) '
      { printf "  %-60s %6d s   cpu %6d s%s\n", $1, $2, $4, ($3 == 0 ? "" : "   FAILED (rc " $3 ")"); t += $2 }
      END { printf "  %-60s %6d s (%.1f min)\n", "sum (a nested step is counted with its parent)", t, t / 60
            printf "  %-60s %6d s (%.1f min)\n", "wall clock", wall, wall / 60 }' "$FUSEDNORM_STEPS"
  fi
  rm -f "$FUSEDNORM_STEPS"
}

# ccache for the C++ compiles of the test build and the Python package's build of the same
# library (python.sh): both compile the same sources with the same commands, so the second is
# served from the first's objects. The cache lives in build-ccache/ of the checkout (nothing
# outside it; a fresh clone starts empty). `ccache_args` prints the CMake arguments, nothing where
# ccache is missing or FUSEDNORM_CCACHE=0: the launcher, and the compiler by one name for both
# builds (${CXX:-c++}, CMake's own default; scikit-build-core would take Python's g++, and ccache
# counts c++ and g++ as different compilers).
ccache_args() {
  [ "${FUSEDNORM_CCACHE:-1}" = 1 ] && command -v ccache >/dev/null && command -v "${CXX:-c++}" >/dev/null || return 0
  echo "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER=$(command -v "${CXX:-c++}")"
}
export CCACHE_DIR=${CCACHE_DIR:-$PWD/build-ccache}
export CCACHE_NOHASHDIR=1  # the build directories differ; no debug info in these builds names them
export CCACHE_DEPEND=1     # a miss reads the compiler's -MD list: no second preprocessor run

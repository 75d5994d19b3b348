# fusednorm-bench's command line (ctest bench_cli and bench_plot, label cpu; tests/CMakeLists.txt).
#   cmake -DBENCH=<fusednorm-bench> -DMODE=cli|plot [-DWORK_DIR=<dir>] -P bench_cli_test.cmake
# cli: --help lists every option (exit 0); bad options and values exit 2 with the reason on
# stderr; a tiny run of every operation prints the table docs/performance.md quotes (header and
# row layout), and with --json one object a case carrying what a plot needs, status ok, no
# mismatch. plot: the same run with --plot writes a PNG (skipped where python3 lacks matplotlib).
# CMake's own JSON parser reads the lines, so the test needs no interpreter.
cmake_minimum_required(VERSION 3.25)

set(tiny --ops rmsnorm_quant,rmsnorm_fp4,qk_rmsnorm,mla --hidden 64 --tokens 2 --in bf16 --out int8 --modes row
    --qk-shapes 2x128x128 --mla-heads 16 --mla-pages 64 --mla-cache bf16 --time 0.001 --copy-mib 4 --rotate-mib 1
    --threads 1)
set(ops rmsnorm_quant rmsnorm_fp4 qk_rmsnorm mla)
set(cases_per_op 1 4 7 1)  # modes row; NVFP4/MXFP4 x two layouts; the seven qk forms; one mla case

# Runs fusednorm-bench with ARGN, expecting exit status `rc`; its output in `out` and `err`.
function(bench rc)
  execute_process(COMMAND ${BENCH} ${ARGN} RESULT_VARIABLE got OUTPUT_VARIABLE o ERROR_VARIABLE e)
  if(NOT got STREQUAL rc)
    message(FATAL_ERROR "fusednorm-bench ${ARGN}: exit status ${got}, expected ${rc}\nstdout:\n${o}\nstderr:\n${e}")
  endif()
  set(out "${o}" PARENT_SCOPE)
  set(err "${e}" PARENT_SCOPE)
endfunction()

function(expect_in text what)
  string(FIND "${text}" "${what}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected '${what}' in:\n${text}")
  endif()
endfunction()

if(MODE STREQUAL "plot")
  execute_process(COMMAND python3 -c "import matplotlib" RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0)
    message("FUSEDNORM_SKIP: python3 on PATH lacks matplotlib (pip install matplotlib), which --plot needs")
    return()
  endif()
  set(png ${WORK_DIR}/bench_plot.png)
  file(REMOVE ${png})
  bench(0 ${tiny} --plot ${png})
  file(READ ${png} magic LIMIT 8 HEX)
  if(NOT magic STREQUAL "89504e470d0a1a0a")
    message(FATAL_ERROR "--plot ${png}: not a PNG (first bytes ${magic})\nstderr:\n${err}")
  endif()
  return()
endif()

bench(0 --help)
foreach(opt --ops --qk-shapes --mla-heads --mla-pages --mla-cache --modes --in --out --hidden --tokens --quick
        --scalar-speedup --device --timing --threads --reps --time --budget-gib --copy-mib --rotate-mib
        --check-rows --seed --json --plot -h,--help)
  expect_in("${out}" "  ${opt}")
endforeach()

# Each bad command line with a word its message must name.
foreach(bad "--no-such-option|no-such-option" "--hidden 0|--hidden" "--hidden|--hidden" "--timing fast|fast"
        "--ops rmsnorm_quant,nope|nope" "--json=1|json" "--threads 1.5|--threads" "--qk-shapes 2x3|2x3"
        "--scalar-speedup --plot x.png|--plot" "stray|stray")
  string(REPLACE "|" ";" parts "${bad}")
  list(GET parts 0 args)
  list(GET parts 1 word)
  separate_arguments(args UNIX_COMMAND "${args}")
  bench(2 ${args})
  expect_in("${err}" "${word}")
endforeach()

# The table: its header as docs quote it, one row a case in the same columns.
set(want 0)
foreach(k ${cases_per_op})
  math(EXPR want "${want} + ${k}")
endforeach()
bench(0 ${tiny})
expect_in("${out}" "op            mode           in    out           rows   cols  sets   reps          us     GB/s  %copy mismatches\n")
string(REGEX MATCHALL "\n(rmsnorm_quant|rmsnorm_fp4|qk_rmsnorm|mla) " table_rows "${out}")
list(LENGTH table_rows n)
if(NOT n EQUAL want)
  message(FATAL_ERROR "the table: ${n} rows, expected ${want} (one a case):\n${out}")
endif()
expect_in("${out}" "\nqk_rmsnorm    stats          bf16  bf16             2 128+128   ")
expect_in("${out}" "\nrmsnorm_quant row            bf16  int8             2     64  ")
expect_in("${out}" "\nmla           Hq16 page64    bf16  bf16             2    576  ")

# --json: one object a case, every key a plot needs, status ok and no mismatch.
bench(0 ${tiny} --json)
string(REGEX MATCHALL "[^\n]+" lines "${out}")
list(LENGTH lines n)
if(NOT n EQUAL want)
  message(FATAL_ERROR "--json: ${n} lines, expected ${want} (one a case):\n${out}")
endif()
foreach(op ${ops})
  set(count_${op} 0)
endforeach()
foreach(line ${lines})
  string(JSON type ERROR_VARIABLE jerr TYPE "${line}")
  if(jerr OR NOT type STREQUAL "OBJECT")
    message(FATAL_ERROR "--json: not a JSON object (${jerr}): ${line}")
  endif()
  foreach(key op mode device in_dtype out_dtype rows cols us gbps copy_gbps pct_of_copy mismatches status)
    string(JSON value ERROR_VARIABLE jerr GET "${line}" ${key})
    if(jerr)
      message(FATAL_ERROR "--json: no key ${key}: ${line}")
    endif()
    set(${key} "${value}")
  endforeach()
  if(NOT status STREQUAL "ok" OR NOT mismatches EQUAL 0)
    message(FATAL_ERROR "--json: a case failed: ${line}")
  endif()
  math(EXPR count_${op} "${count_${op}} + 1")
endforeach()
foreach(op k IN ZIP_LISTS ops cases_per_op)
  if(NOT "${count_${op}}" EQUAL k)
    message(FATAL_ERROR "--json: ${count_${op}} lines of ${op}, expected ${k}:\n${out}")
  endif()
endforeach()

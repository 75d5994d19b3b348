# cmake -P script for the ctest tests hip_gfx942_* (backends/hip/CMakeLists.txt): compiles one unit
# of the GPU backend's device code for gfx942 (MI300) with Debian's clang-19 and HIP 5.2 headers.
# Compile-only: the code object is checked for, never shipped.
#   CLANG LLVM_DIS LLVM_AS  clang-19's clang++, llvm-dis, llvm-as
#   BITCODE                 Debian's device libraries (/usr/lib/x86_64-linux-gnu/amdgcn/bitcode)
#   WORK_DIR                a directory of the build tree
#   SOURCE ARGS             the translation unit, and the compile flags separated by '|'; without
#                           them the script only prepares WORK_DIR/bitcode (the fixture test
#                           hip_gfx942_bitcode, run once before the compiles)
#   EXPECT OBJDUMP          optional: an instruction the code object must contain (MI300's fnuz
#                           conversion in the units that encode f8e4m3fnuz), llvm-objdump to look
# Debian's device libraries stop at gfx940; oclc_isa_version_942.bc is the gfx940 one with the ISA
# version constant 9400 changed to 9402, written into WORK_DIR/bitcode (next to links to the others).
foreach(v CLANG LLVM_DIS LLVM_AS BITCODE WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "hip_gfx942: -D${v}= is required")
  endif()
endforeach()
set(lib ${WORK_DIR}/bitcode)
set(isa942 ${lib}/oclc_isa_version_942.bc)
if(DEFINED SOURCE)
  if(NOT DEFINED ARGS)
    message(FATAL_ERROR "hip_gfx942: -DARGS= is required with -DSOURCE=")
  endif()
  if(NOT EXISTS ${isa942})
    message(FATAL_ERROR "hip_gfx942: ${isa942} is missing (the test hip_gfx942_bitcode makes it)")
  endif()
  get_filename_component(name ${SOURCE} NAME_WE)
  string(REPLACE "|" ";" args "${ARGS}")
  set(out ${WORK_DIR}/${name}-gfx942.hsaco)
  file(REMOVE ${out})
  execute_process(COMMAND ${CLANG} ${args} --rocm-device-lib-path=${lib} -c ${SOURCE} -o ${out}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE log ERROR_VARIABLE log)
  if(NOT rc EQUAL 0 OR NOT EXISTS ${out})
    message(FATAL_ERROR "gfx942 compile of ${SOURCE} failed (${rc}):\n${log}")
  endif()
  file(SIZE ${out} size)
  file(READ ${out} magic LIMIT 4 HEX)
  if(NOT magic STREQUAL "7f454c46")
    message(FATAL_ERROR "${out} is not an ELF code object")
  endif()
  if(DEFINED EXPECT)
    execute_process(COMMAND ${OBJDUMP} -d --mcpu=gfx942 ${out} COMMAND grep -c -w ${EXPECT}
                    RESULTS_VARIABLE rcs OUTPUT_VARIABLE count OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_VARIABLE err)
    if(NOT rcs STREQUAL "0;0")
      message(FATAL_ERROR "${out} has no ${EXPECT} (llvm-objdump, grep: ${rcs}) ${err}")
    endif()
    set(log "${log} (${count} x ${EXPECT})")
  endif()
  message(STATUS "gfx942: ${out} (${size} bytes)${log}")
  return()
endif()

file(MAKE_DIRECTORY ${lib})
file(GLOB debian_libs ${BITCODE}/*.bc)
foreach(f IN LISTS debian_libs)
  get_filename_component(name ${f} NAME)
  if(NOT EXISTS ${lib}/${name})
    file(CREATE_LINK ${f} ${lib}/${name} SYMBOLIC)
  endif()
endforeach()

if(NOT EXISTS ${isa942} OR ${BITCODE}/oclc_isa_version_940.bc IS_NEWER_THAN ${isa942})
  execute_process(COMMAND ${LLVM_DIS} ${BITCODE}/oclc_isa_version_940.bc -o ${WORK_DIR}/isa940.ll
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "llvm-dis ${BITCODE}/oclc_isa_version_940.bc failed: ${rc}")
  endif()
  file(READ ${WORK_DIR}/isa940.ll ir)
  string(REPLACE "i32 9400" "i32 9402" ir942 "${ir}")
  if(ir942 STREQUAL ir)
    message(FATAL_ERROR "oclc_isa_version_940.bc has no 'i32 9400' to change into 9402")
  endif()
  file(WRITE ${WORK_DIR}/isa942.ll "${ir942}")
  execute_process(COMMAND ${LLVM_AS} ${WORK_DIR}/isa942.ll -o ${isa942} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "llvm-as failed: ${rc}")
  endif()
endif()

message(STATUS "gfx942: ${lib} ready")

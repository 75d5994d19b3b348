# The install test: `cmake --install` the configured build into a scratch prefix, configure and
# build the consumer project (tests/install/consumer) against that prefix only, run it.
# Run as: cmake -DSOURCE_DIR=<project root> -DBINARY_DIR=<build dir> -DWORK_DIR=<scratch>
#               -P run_install_test.cmake
# The build dir must be built (libfusednorm.so and every installed target) before this runs.
cmake_minimum_required(VERSION 3.25)

foreach(var IN ITEMS SOURCE_DIR BINARY_DIR WORK_DIR)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake: pass -D${var}=...")
  endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/consumer-build")
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# Runs a command, echoes it, fails the test with its output on a non-zero exit.
# A HINT=... argument before the command adds a line to the failure message.
function(run_step what)
  cmake_parse_arguments(PARSE_ARGV 1 step "" "HINT" "")
  set(cmd ${step_UNPARSED_ARGUMENTS})
  message(STATUS "[install test] ${what}: ${cmd}")
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "[install test] ${what} failed (${rc}):\n${out}\n${err}\n${step_HINT}")
  endif()
  set(step_output "${out}${err}" PARENT_SCOPE)
endfunction()

# Settings of the main build that the consumer should share: the compiler, and where dlpack
# (a public dependency, found again by fusednormConfig.cmake) came from.
set(consumer_args "")
foreach(entry IN ITEMS CMAKE_CXX_COMPILER dlpack_DIR)
  file(STRINGS "${BINARY_DIR}/CMakeCache.txt" line REGEX "^${entry}:[A-Z]+=")
  if(line)
    string(REGEX REPLACE "^${entry}:[A-Z]+=" "" value "${line}")
    if(NOT value STREQUAL "" AND NOT value MATCHES "-NOTFOUND$")
      list(APPEND consumer_args "-D${entry}=${value}")
    endif()
  endif()
endforeach()
find_program(NINJA_EXECUTABLE NAMES ninja ninja-build)
if(NINJA_EXECUTABLE)
  list(APPEND consumer_args -G Ninja "-DCMAKE_MAKE_PROGRAM=${NINJA_EXECUTABLE}")
endif()

run_step("install" HINT "(is ${BINARY_DIR} fully built? `cmake --build ${BINARY_DIR}` first)"
         "${CMAKE_COMMAND}" --install "${BINARY_DIR}" --prefix "${prefix}")
foreach(f IN ITEMS include/fusednorm/fusednorm.h include/fusednorm/fusednorm.hpp)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "[install test] ${f} is not installed")
  endif()
endforeach()
file(GLOB_RECURSE installed_libs "${prefix}/*/libfusednorm.so")
if(NOT installed_libs)
  message(FATAL_ERROR "[install test] no libfusednorm.so under ${prefix}")
endif()

run_step("configure consumer" "${CMAKE_COMMAND}" -S "${SOURCE_DIR}/tests/install/consumer" -B "${consumer_build}"
         ${consumer_args} -DCMAKE_BUILD_TYPE=Release "-DCMAKE_PREFIX_PATH=${prefix}"
         -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run_step("build consumer" "${CMAKE_COMMAND}" --build "${consumer_build}")

# Run with no LD_LIBRARY_PATH: the executable must find the installed library by itself.
run_step("run consumer" "${CMAKE_COMMAND}" -E env --unset=LD_LIBRARY_PATH "${consumer_build}/fusednorm_consumer")
message(STATUS "[install test] consumer output:\n${step_output}")

# It must have loaded the installed libfusednorm, not the one in the build tree.
file(REAL_PATH "${prefix}" real_prefix)
string(REGEX MATCH "loaded: [^\n]*" loaded "${step_output}")
string(REPLACE "loaded: " "" loaded "${loaded}")
string(FIND "${loaded}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "[install test] the consumer loaded '${loaded}', not the library installed under ${real_prefix}")
endif()
if(NOT step_output MATCHES "\nOK\n")
  message(FATAL_ERROR "[install test] the consumer did not print OK")
endif()
# pkg-config: a C program compiled with nothing but `cc main.c $(pkg-config --cflags --libs
# fusednorm)` against the installed prefix (the .pc file's own location gives the prefix), run
# with the library directory pkg-config names as its RPATH.
find_program(PKG_CONFIG_EXECUTABLE NAMES pkg-config pkgconf)
find_program(C_COMPILER NAMES cc gcc clang)
if(NOT PKG_CONFIG_EXECUTABLE OR NOT C_COMPILER)
  message(FATAL_ERROR "[install test] pkg-config and a C compiler are needed (tests/scripts/install_deps.sh installs them)")
endif()
file(GLOB_RECURSE pc_files "${prefix}/*/pkgconfig/fusednorm.pc")
if(NOT pc_files)
  message(FATAL_ERROR "[install test] no pkgconfig/fusednorm.pc under ${prefix}")
endif()
list(GET pc_files 0 pc_file)
get_filename_component(pc_dir "${pc_file}" DIRECTORY)
set(pc "${CMAKE_COMMAND}" -E env "PKG_CONFIG_PATH=${pc_dir}" --unset=PKG_CONFIG_LIBDIR "${PKG_CONFIG_EXECUTABLE}")
run_step("pkg-config version" ${pc} --modversion fusednorm)
string(STRIP "${step_output}" pc_version)
file(STRINGS "${SOURCE_DIR}/CMakeLists.txt" project_line REGEX "^project\\(fusednorm VERSION")
string(REGEX MATCH "VERSION ([0-9.]+)" _ "${project_line}")
if(NOT pc_version STREQUAL CMAKE_MATCH_1)
  message(FATAL_ERROR "[install test] pkg-config --modversion fusednorm gave '${pc_version}', the project is ${CMAKE_MATCH_1}")
endif()
run_step("pkg-config flags" ${pc} --cflags --libs fusednorm)
separate_arguments(pc_flags UNIX_COMMAND "${step_output}")
run_step("pkg-config libdir" ${pc} --variable=libdir fusednorm)
string(STRIP "${step_output}" pc_libdir)
file(REAL_PATH "${pc_libdir}" pc_libdir)
run_step("compile C program with pkg-config" "${C_COMPILER}" -std=c99 -Wall -Wextra -Werror
         "${SOURCE_DIR}/tests/install/pkgconfig/main.c" -o "${WORK_DIR}/fusednorm_c_consumer" ${pc_flags} -lm
         "-Wl,-rpath,${pc_libdir}")
run_step("run C program" "${CMAKE_COMMAND}" -E env --unset=LD_LIBRARY_PATH "${WORK_DIR}/fusednorm_c_consumer")
message(STATUS "[install test] C program (pkg-config) output:\n${step_output}")
if(NOT step_output MATCHES "\nOK\n")
  message(FATAL_ERROR "[install test] the C program did not print OK")
endif()
message(STATUS "[install test] passed")

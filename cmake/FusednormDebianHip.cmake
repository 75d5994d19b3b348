# HIP toolchain selection, included by the root CMakeLists.txt before check_language(HIP) /
# enable_language(HIP).
#
# Debian 12's HIP packages (hipcc libamdhip64-dev rocm-device-libs: HIP 5.2 on clang-15) install
# ROCm into /usr with the multiarch layout, which CMake's HIP language cannot use as it is
# (docs/building.md): CMake wants <ROCm root>/lib/cmake/hip-lang, clang must be told where ROCm and
# its device libraries are, the compiler check's sub-project must find amd_comgr, and there is no
# GPU to enumerate architectures from. When (and only when) that layout is the toolchain in use,
# this module supplies all of it; a real ROCm install (/opt/rocm, ROCM_PATH, or a ROCm root on
# CMAKE_PREFIX_PATH) takes CMake's standard path untouched, except that its own clang is chosen
# when no HIP compiler was named.
#
# Which toolchain:
#   1. a HIP compiler named by the user (CMAKE_HIP_COMPILER or the HIPCXX environment variable):
#      Debian's layout iff it is Debian's clang-15;
#   2. else a ROCm root with lib/cmake/hip-lang on CMAKE_PREFIX_PATH, in $ROCM_PATH or /opt/rocm:
#      the standard path, with CMAKE_HIP_COMPILER = <root>/llvm/bin/clang++ and the root on the
#      environment's CMAKE_PREFIX_PATH (for the compiler check's sub-project);
#   3. else Debian's layout if all of its pieces are installed;
#   4. else nothing is set: check_language(HIP) decides (FUSEDNORM_HIP=AUTO).
#
# Sets FUSEDNORM_HIP_DEBIAN (TRUE/FALSE) and, for Debian's layout, FUSEDNORM_HIP_DEBIAN_BITCODE (the
# device library directory) and FUSEDNORM_HIP_DEBIAN_FLAGS (the flags added to CMAKE_HIP_FLAGS).

set(FUSEDNORM_HIP_DEBIAN FALSE)

# hip-lang's find_dependency(amd_comgr / AMDDeviceLibs) also runs in the compiler check's
# sub-project, which sees the environment but not this project's CMAKE_PREFIX_PATH.
macro(_fn_env_prefix_path dir)
  if(NOT ":$ENV{CMAKE_PREFIX_PATH}:" MATCHES ":${dir}:")
    if("$ENV{CMAKE_PREFIX_PATH}" STREQUAL "")
      set(ENV{CMAKE_PREFIX_PATH} "${dir}")
    else()
      set(ENV{CMAKE_PREFIX_PATH} "${dir}:$ENV{CMAKE_PREFIX_PATH}")
    endif()
  endif()
endmacro()
set(_fn_deb_clang /usr/lib/llvm-15/bin/clang++)
set(_fn_deb_multiarch /usr/lib/x86_64-linux-gnu)  # Debian ships ROCm for amd64 only
set(_fn_deb_hiplang ${_fn_deb_multiarch}/cmake/hip-lang)
set(_fn_deb_bitcode ${_fn_deb_multiarch}/amdgcn/bitcode)

# 1. A compiler named by the user decides.
set(_fn_named "")
if(CMAKE_HIP_COMPILER)
  set(_fn_named "${CMAKE_HIP_COMPILER}")
elseif(NOT "$ENV{HIPCXX}" STREQUAL "")
  separate_arguments(_fn_named NATIVE_COMMAND "$ENV{HIPCXX}")
  list(GET _fn_named 0 _fn_named)
endif()

# A real ROCm install, if any.
set(_fn_rocm "")
foreach(_fn_p IN LISTS CMAKE_PREFIX_PATH ITEMS "$ENV{ROCM_PATH}" /opt/rocm)
  if(_fn_p AND EXISTS "${_fn_p}/lib/cmake/hip-lang/hip-lang-config.cmake")
    set(_fn_rocm "${_fn_p}")
    break()
  endif()
endforeach()

set(_fn_debian FALSE)
if(_fn_named)
  if(EXISTS "${_fn_named}" AND EXISTS "${_fn_deb_clang}")
    file(REAL_PATH "${_fn_named}" _fn_a)
    file(REAL_PATH "${_fn_deb_clang}" _fn_b)
    if(_fn_a STREQUAL _fn_b)
      set(_fn_debian TRUE)
    endif()
  endif()
elseif(CMAKE_HIP_COMPILER_ROCM_ROOT)
  # The user chose the ROCm root: CMake's standard path.
elseif(_fn_rocm)
  # 2. The ROCm install's clang. FORCE only replaces a NOTFOUND left by an earlier failed
  # check_language(HIP).
  if(EXISTS "${_fn_rocm}/llvm/bin/clang++")
    set(CMAKE_HIP_COMPILER "${_fn_rocm}/llvm/bin/clang++" CACHE FILEPATH "HIP compiler" FORCE)
  endif()
elseif(EXISTS "${_fn_deb_clang}")
  # 3. Debian's layout, if every piece is there (else leave the decision to check_language).
  set(_fn_debian TRUE)
endif()

if(_fn_debian)
  set(_fn_missing "")
  foreach(_fn_f IN ITEMS ${_fn_deb_clang} ${_fn_deb_hiplang}/hip-lang-config.cmake
                         ${_fn_deb_multiarch}/cmake/amd_comgr/amd_comgr-config.cmake
                         ${_fn_deb_bitcode}/ocml.bc /usr/include/hip/hip_runtime.h
                         ${_fn_deb_multiarch}/libamdhip64.so)
    if(NOT EXISTS "${_fn_f}")
      list(APPEND _fn_missing "${_fn_f}")
    endif()
  endforeach()
  if(_fn_missing)
    message(STATUS "HIP: Debian's clang-15 is installed but not Debian's HIP: missing ${_fn_missing} "
                   "(apt-get install hipcc libamdhip64-dev rocm-device-libs)")
    set(_fn_debian FALSE)
  endif()
endif()

if(NOT _fn_debian AND _fn_rocm)
  message(STATUS "HIP: ROCm at ${_fn_rocm} (CMake's standard HIP support)")
  _fn_env_prefix_path("${_fn_rocm}")
endif()

if(_fn_debian)
  set(FUSEDNORM_HIP_DEBIAN TRUE)
  set(FUSEDNORM_HIP_DEBIAN_BITCODE ${_fn_deb_bitcode})
  message(STATUS "HIP: Debian's layout (HIP 5.2, ${_fn_deb_clang}); ROCm root forwarded from "
                 "${CMAKE_BINARY_DIR}/debian-rocm")

  # The compiler (unless named already); FORCE only replaces a NOTFOUND left by an earlier failed
  # check_language(HIP).
  if(NOT CMAKE_HIP_COMPILER)
    set(CMAKE_HIP_COMPILER ${_fn_deb_clang} CACHE FILEPATH "HIP compiler" FORCE)
  endif()

  # Where ROCm and the device libraries are, for every HIP compilation (the compiler
  # identification and check included). A normal variable over the cache entry: user flags stay.
  set(FUSEDNORM_HIP_DEBIAN_FLAGS --rocm-path=/usr --rocm-device-lib-path=${_fn_deb_bitcode})
  if(NOT CMAKE_HIP_FLAGS MATCHES "--rocm-path=")
    list(JOIN FUSEDNORM_HIP_DEBIAN_FLAGS " " _fn_flags)
    string(STRIP "${CMAKE_HIP_FLAGS} ${_fn_flags}" CMAKE_HIP_FLAGS)
  endif()

  # A ROCm root for CMake: lib/cmake/hip-lang forwards to Debian's package and drops /usr/include
  # from its imported include directories (as -isystem it breaks libstdc++'s #include_next).
  set(_fn_root ${CMAKE_BINARY_DIR}/debian-rocm)
  file(CONFIGURE OUTPUT ${_fn_root}/lib/cmake/hip-lang/hip-lang-config.cmake @ONLY CONTENT [=[
# Generated by fusednorm's cmake/FusednormDebianHip.cmake: CMake's HIP language loads
# <ROCm root>/lib/cmake/hip-lang; Debian installs hip-lang under its multiarch directory.
include("@_fn_deb_hiplang@/hip-lang-config.cmake")
foreach(_fn_target IN ITEMS hip-lang::device hip-lang::amdhip64)
  foreach(_fn_prop IN ITEMS INTERFACE_INCLUDE_DIRECTORIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)
    get_target_property(_fn_value ${_fn_target} ${_fn_prop})
    if(NOT _fn_value)
      continue()
    endif()
    set(_fn_wrap FALSE)
    if(_fn_value MATCHES "^\\$<\\$<COMPILE_LANGUAGE:HIP>:(.*)>$")
      set(_fn_value "${CMAKE_MATCH_1}")
      set(_fn_wrap TRUE)
    endif()
    list(REMOVE_ITEM _fn_value "/usr/include" "/usr/include/" "")
    list(REMOVE_DUPLICATES _fn_value)
    if(_fn_value AND _fn_wrap)
      set(_fn_value "$<$<COMPILE_LANGUAGE:HIP>:${_fn_value}>")
    endif()
    set_target_properties(${_fn_target} PROPERTIES ${_fn_prop} "${_fn_value}")
  endforeach()
endforeach()
unset(_fn_target)
unset(_fn_prop)
unset(_fn_value)
unset(_fn_wrap)
]=])
  file(CONFIGURE OUTPUT ${_fn_root}/lib/cmake/hip-lang/hip-lang-config-version.cmake @ONLY CONTENT [=[
include("@_fn_deb_hiplang@/hip-lang-config-version.cmake")
]=])
  set(CMAKE_HIP_COMPILER_ROCM_ROOT ${_fn_root})

  # Debian's amd_comgr package is under the multiarch cmake directory.
  _fn_env_prefix_path(${_fn_deb_multiarch}/cmake)

  # No GPU to enumerate: explicit architectures (the root CMakeLists.txt has the default), and
  # clang-15 knows gfx90a and gfx940 but not gfx941/gfx942.
  if(NOT CMAKE_HIP_ARCHITECTURES)
    set(CMAKE_HIP_ARCHITECTURES "gfx90a;gfx940" CACHE STRING "HIP architectures" FORCE)
  endif()
  foreach(_fn_arch IN LISTS CMAKE_HIP_ARCHITECTURES)
    if(_fn_arch MATCHES "^gfx94[12]")
      message(FATAL_ERROR "CMAKE_HIP_ARCHITECTURES=${CMAKE_HIP_ARCHITECTURES}: Debian's clang-15 (HIP 5.2) "
        "does not know ${_fn_arch}. Use gfx940 here, or build against ROCm 6 for MI300 "
        "(docs/building.md); the gfx942 compile-only check is the tests hip_gfx942_* (one per unit).")
    endif()
  endforeach()
endif()

unset(_fn_deb_clang)
unset(_fn_deb_multiarch)
unset(_fn_deb_hiplang)
unset(_fn_deb_bitcode)
unset(_fn_named)
unset(_fn_debian)
unset(_fn_missing)
unset(_fn_rocm)
unset(_fn_p)
unset(_fn_f)
unset(_fn_arch)
unset(_fn_root)
unset(_fn_flags)
unset(_fn_a)
unset(_fn_b)

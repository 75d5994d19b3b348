# `cmake --install`: headers, libfusednorm.so (with SONAME), and a CMake package so that
# find_package(fusednorm) gives fusednorm::fusednorm.
include(CMakePackageConfigHelpers)

install(TARGETS fusednorm EXPORT fusednormTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/fusednorm DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT fusednormTargets NAMESPACE fusednorm::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fusednorm)
configure_package_config_file(cmake/fusednormConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/fusednormConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fusednorm)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/fusednormConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/fusednormConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/fusednormConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fusednorm)

# pkg-config: fusednorm.pc beside the CMake package (<libdir>/pkgconfig), relocatable through
# ${pcfiledir} where libdir and includedir are under the prefix. The public header includes
# <dlpack/dlpack.h>: its directory goes into Cflags unless it is the system's /usr/include.
set(_fn_pcdir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(FUSEDNORM_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _fn_up "/prefix/${_fn_pcdir}" "/prefix")
  string(REGEX REPLACE "/$" "" _fn_up "${_fn_up}")
  set(FUSEDNORM_PC_PREFIX "\${pcfiledir}/${_fn_up}")
endif()
foreach(kind IN ITEMS LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(FUSEDNORM_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(FUSEDNORM_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
set(FUSEDNORM_PC_DLPACK_CFLAGS "")
get_target_property(_fn_dlpack_inc dlpack::dlpack INTERFACE_INCLUDE_DIRECTORIES)
foreach(dir IN LISTS _fn_dlpack_inc)
  if(NOT dir STREQUAL "/usr/include" AND NOT dir MATCHES "^\\$<")
    string(APPEND FUSEDNORM_PC_DLPACK_CFLAGS " -I${dir}")
  endif()
endforeach()
configure_file(cmake/fusednorm.pc.in ${CMAKE_CURRENT_BINARY_DIR}/fusednorm.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/fusednorm.pc DESTINATION ${_fn_pcdir})

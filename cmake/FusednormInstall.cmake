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

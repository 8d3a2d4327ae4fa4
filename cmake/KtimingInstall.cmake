# Install rules: headers, libraries, the CMake package (find_package(ktiming)) and ktiming.pc.
include(CMakePackageConfigHelpers)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(_kt_install_targets ktiming)
if(TARGET ktiming_analysis)
  list(APPEND _kt_install_targets ktiming_analysis)
endif()
install(TARGETS ${_kt_install_targets} EXPORT ktimingTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ktimingTargets NAMESPACE ktiming:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ktiming)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ktimingConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ktimingConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ktiming)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ktimingConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ktimingConfig.cmake ${PROJECT_BINARY_DIR}/ktimingConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ktiming)
configure_file(${PROJECT_SOURCE_DIR}/cmake/ktiming.pc.in ${PROJECT_BINARY_DIR}/ktiming.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ktiming.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

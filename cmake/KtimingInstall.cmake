# Install rules and the Debian package: headers, libraries, CLI and shims, the CMake package
# (find_package(ktiming)), ktiming.pc and ktiming-analysis.pc. Everything installed is relocatable: binaries find
# their libraries through a RUNPATH relative to $ORIGIN, .pc files locate the prefix from ${pcfiledir}, and
# ktimingConfig.cmake from its own directory, so a tree installed with --prefix or unpacked from the .deb
# anywhere works without LD_LIBRARY_PATH.
include(CMakePackageConfigHelpers)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/ktiming)

set(_kt_install_targets ktiming)
if(TARGET ktiming_analysis)
  list(APPEND _kt_install_targets ktiming_analysis)
  set_target_properties(ktiming_analysis PROPERTIES INSTALL_RPATH "$ORIGIN")
endif()
install(TARGETS ${_kt_install_targets} EXPORT ktimingTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET ktiming_cli)
  file(RELATIVE_PATH _kt_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
  set_target_properties(ktiming_cli PROPERTIES INSTALL_RPATH "$ORIGIN/${_kt_bin_to_lib}")
endif()
install(EXPORT ktimingTargets NAMESPACE ktiming:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ktiming)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ktimingConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ktimingConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ktiming)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ktimingConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ktimingConfig.cmake ${PROJECT_BINARY_DIR}/ktimingConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ktiming)

# pkg-config: the prefix is found from the .pc file's own place (<prefix>/<libdir>/pkgconfig).
file(RELATIVE_PATH KT_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" KT_PC_TO_PREFIX "${KT_PC_TO_PREFIX}")
set(_kt_pc_files ktiming)
if(TARGET ktiming_analysis)
  list(APPEND _kt_pc_files ktiming-analysis)
endif()
foreach(pc ${_kt_pc_files})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endforeach()

# `make package` (cpack): a Debian package of the same install tree, installed under /usr.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ktiming)
set(CPACK_PACKAGE_VENDOR "the ktiming authors")
set(CPACK_PACKAGE_CONTACT "the ktiming authors <ktiming@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Per-kernel, per-dispatch timing for CPU, OpenCL, Vulkan and CUDA")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# Runtime dependencies from the binaries' NEEDED entries (libc, and libcjson for the analysis library).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
include(CPack)

# Installing hmc: the libraries as exported targets (hmc::core, hmc::transports, hmc::collectives,
# hmc::launcher, hmc::ddp where built, and hmc::hmc, the one to link), hmcConfig.cmake with its
# version file, hmc.pc, the public headers, the binaries and the examples.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(HMC_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/hmc)
set(HMC_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/hmc)

# The public headers: the communicator API, buffers, options, codecs and what they include
# (tests/integration/install_test.sh checks that they compile alone, outside the tree), and the
# libtorch pieces. Everything else (algorithms, transports, the coordinator) stays inside.
set(HMC_PUBLIC_HEADERS
  collectives/average_outcome.h collectives/codecs/codec.h collectives/collective_options.h
  collectives/communicator.h collectives/options.h collectives/work.h
  core/buffer.h core/dtype.h core/mutex.h core/option_table.h core/options.h core/peer_table.h
  core/reduce_op.h core/wire.h
  transports/request.h transports/transport_options.h)
if(HMC_HAVE_Torch)
  file(GLOB hmc_ddp_headers RELATIVE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/ddp/*.h)
  list(APPEND HMC_PUBLIC_HEADERS ${hmc_ddp_headers})
  # The header c10d/reducer.hpp includes that Debian's libtorch lacks (ddp/CMakeLists.txt).
  install(DIRECTORY ddp/compat/ DESTINATION ${HMC_INSTALL_INCLUDEDIR}/compat COMPONENT dev)
endif()
foreach(header ${HMC_PUBLIC_HEADERS})
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${header} DESTINATION ${HMC_INSTALL_INCLUDEDIR}/${dir} COMPONENT dev)
endforeach()

set(hmc_libraries hmc_core hmc_transports hmc_collectives hmc_launcher)
if(HMC_HAVE_Torch)
  list(APPEND hmc_libraries hmc_ddp)
endif()
foreach(library ${hmc_libraries})
  string(REPLACE "hmc_" "" short ${library})
  set_target_properties(${library} PROPERTIES EXPORT_NAME ${short})
endforeach()
install(TARGETS ${hmc_libraries} hmc EXPORT hmcTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT hmcTargets NAMESPACE hmc:: FILE hmcTargets.cmake DESTINATION ${HMC_INSTALL_CMAKEDIR}
  COMPONENT dev)

configure_package_config_file(cmake/hmcConfig.cmake.in ${PROJECT_BINARY_DIR}/hmcConfig.cmake
  INSTALL_DESTINATION ${HMC_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/hmcConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/hmcConfig.cmake ${PROJECT_BINARY_DIR}/hmcConfigVersion.cmake
  DESTINATION ${HMC_INSTALL_CMAKEDIR} COMPONENT dev)

# pkg-config: the libraries in link order, then what they need (static libraries: all of it).
set(HMC_PC_REQUIRES "hwloc openssl zlib absl_status absl_statusor absl_str_format absl_strings absl_synchronization absl_time absl_int128")
if(HMC_HAVE_UCX)
  string(APPEND HMC_PC_REQUIRES " ucx")
endif()
if(HMC_HAVE_OFI)
  string(APPEND HMC_PC_REQUIRES " libfabric")
endif()
file(RELATIVE_PATH HMC_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(cmake/hmc.pc.in ${PROJECT_BINARY_DIR}/hmc.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/hmc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
  COMPONENT dev)

# The programs users run, and the examples' sources with their inventories.
install(TARGETS hmcrun hmc-coordinator hmc-perf hmc-wanem hello_allreduce
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(HMC_HAVE_Torch)
  install(TARGETS train_cv train_nlp RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY examples/ DESTINATION ${CMAKE_INSTALL_DATADIR}/hmc/examples)

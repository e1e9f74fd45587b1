# One Debian package per stack (cpack -G DEB): the component in the component
# directory of the Open MPI it was built against, libdualrail_ucx_mr.so, the
# headers and the tools. A coll component is built against Open MPI's internal
# structures, so it depends on that Open MPI's library package within its
# upstream release (4.1.4 -> >= 4.1.4, << 4.1.5); dpkg-shlibdeps adds UCX,
# hwloc, Boost and the C++ runtime from what the binaries link.

set(dr_release "")
if(EXISTS /etc/os-release)
  file(STRINGS /etc/os-release dr_os REGEX "^VERSION_ID=")
  string(REGEX REPLACE "^VERSION_ID=\"?([0-9]+).*" "\\1" dr_release "${dr_os}")
endif()

# The Debian package that holds the libmpi this tree links (libopenmpi3 on Debian 12,
# libopenmpi40 on 13).
set(dr_ompi_pkg "")
find_program(DUALRAIL_DPKG_QUERY dpkg-query)
if(DUALRAIL_DPKG_QUERY AND MPI_C_LIBRARIES)
  list(GET MPI_C_LIBRARIES 0 dr_libmpi)
  get_filename_component(dr_libmpi "${dr_libmpi}" REALPATH)
  execute_process(COMMAND ${DUALRAIL_DPKG_QUERY} -S "${dr_libmpi}"
    OUTPUT_VARIABLE dr_owner ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REGEX REPLACE "^([^:]+):.*" "\\1" dr_ompi_pkg "${dr_owner}")
endif()

set(CPACK_PACKAGE_NAME dualrail)
set(CPACK_PACKAGE_VENDOR "DualRail")
set(CPACK_PACKAGE_CONTACT "DualRail maintainers <dualrail@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "Open MPI collectives striped over two network planes, surviving a plane failure")
set(CPACK_PACKAGE_DESCRIPTION
  "coll/dualrail for Open MPI ${DUALRAIL_OMPI_VERSION}: allreduce, bcast, barrier and allgather\nstriped over two network planes through UCX (libdualrail_ucx_mr), with failover\nand re-admission; dualrail-info and dualrail-check. Select it with\nmpirun --mca coll_dualrail_priority 100.")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_RELEASE "1+deb${dr_release}")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/ucx_mr)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(dr_depends "openmpi-bin")
if(dr_ompi_pkg)
  string(REGEX MATCH "^([0-9]+)\\.([0-9]+)\\.([0-9]+)$" dr_v "${DUALRAIL_OMPI_VERSION}")
  math(EXPR dr_next "${CMAKE_MATCH_3} + 1")
  string(APPEND dr_depends ", ${dr_ompi_pkg} (>= ${DUALRAIL_OMPI_VERSION}), "
    "${dr_ompi_pkg} (<< ${CMAKE_MATCH_1}.${CMAKE_MATCH_2}.${dr_next})")
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${dr_depends}")
if(DUALRAIL_HAVE_CUDA)
  message(STATUS "DualRail: a package of this build would need the CUDA runtime, which no "
    "Debian package provides here; contrib/package.sh builds packages with -DDUALRAIL_CUDA=OFF")
endif()
include(CPack)

# Topology: NUMA/PCIe-affine NIC choice and plane discovery on the committed
# hwloc XML topologies (tests/topo/), and dualrail-info on them. No root, no lab.
set(DR_TOPO_DIR ${PROJECT_SOURCE_DIR}/tests/topo)

add_executable(test_topo ${CMAKE_CURRENT_LIST_DIR}/test_topo.c)
target_link_libraries(test_topo PRIVATE dualrail_ucx_mr PkgConfig::CMOCKA PkgConfig::HWLOC)
target_compile_definitions(test_topo PRIVATE DR_TOPO_DIR="${DR_TOPO_DIR}")
add_test(NAME unit_topo COMMAND test_topo)
set_tests_properties(unit_topo PROPERTIES TIMEOUT 120 LABELS unit)

# dualrail-info's text and JSON output, choices and errors, on the same files.
add_test(NAME unit_dualrail_info
  COMMAND ${DR_TOPO_DIR}/info_test.sh $<TARGET_FILE:dualrail-info> ${DR_TOPO_DIR})
set_tests_properties(unit_dualrail_info PROPERTIES TIMEOUT 120 LABELS unit)

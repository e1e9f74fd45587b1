# The unit tests that need neither MPI nor Boost (DUALRAIL_GPU_ONLY builds).
foreach(t planes stripe key mr_loopback mr_acks)
  add_executable(test_${t} ${CMAKE_CURRENT_LIST_DIR}/test_${t}.c)
  target_link_libraries(test_${t} PRIVATE dualrail_ucx_mr PkgConfig::CMOCKA)
  add_test(NAME unit_${t} COMMAND test_${t})
  set_tests_properties(unit_${t} PROPERTIES TIMEOUT 120 LABELS unit)
endforeach()
include(${CMAKE_CURRENT_LIST_DIR}/algo_tests.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/gpu_tests.cmake)

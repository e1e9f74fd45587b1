# Unit tests of the GPU path without a GPU: the memory interface (host
# stand-in, the CUDA table on a machine with no GPU, the element operations)
# and the staged allreduce over the fake network with stand-in device memory.
find_package(Threads REQUIRED)
add_executable(test_gpu_mem ${CMAKE_CURRENT_LIST_DIR}/test_gpu_mem.cc)
target_link_libraries(test_gpu_mem PRIVATE dualrail_algo PkgConfig::CMOCKA)
add_executable(test_algo_staged ${CMAKE_CURRENT_LIST_DIR}/test_algo_staged.cc)
target_link_libraries(test_algo_staged PRIVATE dualrail_algo PkgConfig::CMOCKA Threads::Threads)
add_test(NAME unit_gpu_mem COMMAND test_gpu_mem)
add_test(NAME unit_algo_staged COMMAND test_algo_staged)
set_tests_properties(unit_gpu_mem unit_algo_staged PROPERTIES TIMEOUT 300 LABELS unit)
if(DUALRAIL_HAVE_CUDA)
  # A driver too old for the static runtime, with one device allocation
  # (fake_libcuda.c), found first through LD_LIBRARY_PATH.
  add_library(dr_fake_libcuda SHARED ${CMAKE_CURRENT_LIST_DIR}/fake_libcuda.c)
  set_target_properties(dr_fake_libcuda PROPERTIES OUTPUT_NAME cuda SOVERSION 1
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_libcuda)
  add_executable(test_gpu_old_driver ${CMAKE_CURRENT_LIST_DIR}/test_gpu_old_driver.cc)
  target_link_libraries(test_gpu_old_driver PRIVATE dualrail_algo PkgConfig::CMOCKA)
  add_dependencies(test_gpu_old_driver dr_fake_libcuda)
  add_test(NAME unit_gpu_old_driver COMMAND test_gpu_old_driver)
  set_tests_properties(unit_gpu_old_driver PROPERTIES TIMEOUT 60 LABELS unit
    ENVIRONMENT "LD_LIBRARY_PATH=$<TARGET_FILE_DIR:dr_fake_libcuda>")
endif()

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

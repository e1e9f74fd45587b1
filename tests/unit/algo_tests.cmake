# Unit tests of the coll/dualrail algorithm layer (mpi_coll/algo). Included
# from tests/CMakeLists.txt; builds dualrail_algo itself when mpi_coll/ is not
# (yet) part of the build.
if(NOT TARGET dualrail_algo)
  include(${PROJECT_SOURCE_DIR}/mpi_coll/CMakeLists_algo.cmake)
endif()

find_package(Threads REQUIRED)

foreach(t math allreduce rd_small faults mr coll alltoall alltoall_mr reduce gathers fail_mode)
  add_executable(test_algo_${t} ${CMAKE_CURRENT_LIST_DIR}/test_algo_${t}.cc)
  target_link_libraries(test_algo_${t} PRIVATE dualrail_algo PkgConfig::CMOCKA Threads::Threads)
endforeach()

add_test(NAME unit_algo_math COMMAND test_algo_math)
# One thread per rank: split by rank count so that ctest -j runs them side by side.
add_test(NAME unit_algo_allreduce_1_8 COMMAND test_algo_allreduce 1 8)
add_test(NAME unit_algo_allreduce_9_12 COMMAND test_algo_allreduce 9 12)
add_test(NAME unit_algo_allreduce_13_16 COMMAND test_algo_allreduce 13 16)
# Recursive doubling without the engine's set-up: the general schedule's bits, slow mode, errors.
add_test(NAME unit_algo_rd_small COMMAND test_algo_rd_small)
add_test(NAME unit_algo_faults COMMAND test_algo_faults)
# Params::fail (a rank whose staging failed): every algorithm tells its peers, touches nothing.
add_test(NAME unit_algo_fail_mode COMMAND test_algo_fail_mode)
# Bcast, barrier, allgather: peer math, tables by rank count, interleaved kinds, link failures.
add_test(NAME unit_algo_coll_1_8 COMMAND test_algo_coll 1 8)
add_test(NAME unit_algo_coll_9_16 COMMAND test_algo_coll 9 16)
# Reduce, reduce_scatter_block, reduce_scatter: the same, with failures and the allreduce match.
add_test(NAME unit_algo_reduce_1_8 COMMAND test_algo_reduce 1 8)
add_test(NAME unit_algo_reduce_9_16 COMMAND test_algo_reduce 9 16)
# Allgatherv: zero, skewed and all-on-one counts, displacements anywhere, link failures.
add_test(NAME unit_algo_gathers COMMAND test_algo_gathers)
# The C API over ucx_mr on the loopback device (one context per rank thread).
add_test(NAME unit_algo_mr COMMAND test_algo_mr)
set_tests_properties(unit_algo_math unit_algo_allreduce_1_8 unit_algo_allreduce_9_12
  unit_algo_allreduce_13_16 unit_algo_rd_small unit_algo_faults unit_algo_fail_mode unit_algo_mr unit_algo_coll_1_8 unit_algo_coll_9_16
  unit_algo_reduce_1_8 unit_algo_reduce_9_16 unit_algo_gathers
  PROPERTIES TIMEOUT 300 LABELS unit)
# Alltoall, alltoallv: pairwise and Bruck peer math, tables by rank count, skewed v-counts,
# in place, link failures.
add_test(NAME unit_algo_alltoall_1_8 COMMAND test_algo_alltoall 1 8)
add_test(NAME unit_algo_alltoall_9_13 COMMAND test_algo_alltoall 9 13)
# 4097 ranks (threads): pairwise steps past the key's step field, few pairs non-empty.
add_test(NAME unit_algo_alltoall_4097_ranks COMMAND test_algo_alltoall many)
# The C API of both over real ucx_mr contexts on the loopback device.
add_test(NAME unit_algo_alltoall_mr COMMAND test_algo_alltoall_mr)
set_tests_properties(unit_algo_alltoall_1_8 unit_algo_alltoall_9_13 unit_algo_alltoall_4097_ranks
  unit_algo_alltoall_mr PROPERTIES TIMEOUT 300 LABELS unit)

# MPI_THREAD_MULTIPLE without MPI: threads x communicators over thread-safe ucx_mr contexts,
# entered in opposite orders; and the proof that the test catches a process-wide lock held
# around whole collectives (that mode must deadlock, broken by the collectives' timeout).
add_executable(test_mr_threads ${CMAKE_CURRENT_LIST_DIR}/test_mr_threads.cc)
target_link_libraries(test_mr_threads PRIVATE dualrail_algo Threads::Threads)
add_test(NAME unit_mr_threads COMMAND test_mr_threads)
add_test(NAME unit_mr_threads_global_lock_deadlocks COMMAND test_mr_threads --global-lock)
set_tests_properties(unit_mr_threads unit_mr_threads_global_lock_deadlocks
  PROPERTIES TIMEOUT 120 LABELS unit)

# Non-blocking collectives (dr_coll_nb.h): one thread drives four ranks' tasks over ucx_mr on
# loopback; many outstanding on two communicators, completion order, pooled stacks, errors.
add_executable(test_algo_nb ${CMAKE_CURRENT_LIST_DIR}/test_algo_nb.cc)
target_link_libraries(test_algo_nb PRIVATE dualrail_algo Threads::Threads)
add_test(NAME unit_algo_nb COMMAND test_algo_nb)
set_tests_properties(unit_algo_nb PROPERTIES TIMEOUT 120 LABELS unit)

# ucx_mr's watchdog time arithmetic (ucx_mr/health_rules.hpp, header only).
add_executable(test_mr_health_rules ${CMAKE_CURRENT_LIST_DIR}/test_mr_health_rules.cc)
target_include_directories(test_mr_health_rules PRIVATE ${PROJECT_SOURCE_DIR}/ucx_mr)
add_test(NAME unit_mr_health_rules COMMAND test_mr_health_rules)
set_tests_properties(unit_mr_health_rules PROPERTIES TIMEOUT 60 LABELS unit)

# Tests that read a ucx_mr context's internals (ucx_mr/mr_internal.hpp) over loopback:
# test_mr_NAME.cc as unit_mr_NAME.
function(dr_mr_internal_test name)
  add_executable(test_mr_${name} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/test_mr_${name}.cc)
  target_include_directories(test_mr_${name} PRIVATE ${PROJECT_SOURCE_DIR}/ucx_mr)
  target_link_libraries(test_mr_${name} PRIVATE dualrail_ucx_mr PkgConfig::UCX)
  add_test(NAME unit_mr_${name} COMMAND test_mr_${name})
  set_tests_properties(unit_mr_${name} PROPERTIES TIMEOUT 60 LABELS unit)
endfunction()
# A flat send's wire: one UCP tag message (ucx_mr/mr_internal.hpp, kWholeTag); foreign or
# malformed ones dropped (mr_tag.cc).
dr_mr_internal_test(flat_wire)
# A peer's down notice older than the probe's pong that re-admitted the link is ignored.
dr_mr_internal_test(down_notice)
# A link whose endpoint cannot be made goes down and is probed again after the backoff.
dr_mr_internal_test(ep_create_fail)
# A new endpoint waits until UCX has cleared away a dead connection from the peer (a UCX TCP
# abort otherwise, mr_ep.cc: stale_connection).
dr_mr_internal_test(stale_conn)
# Whole small messages over the direct lane (mr_lane.cc): exact, cut frames finished, UCP
# meanwhile, a failed lane takes its link down and comes back.
dr_mr_internal_test(lane)

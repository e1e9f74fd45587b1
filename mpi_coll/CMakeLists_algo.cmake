# coll/dualrail algorithm layer: pure C++ (no Open MPI headers), a static PIC
# library the component .so and the unit tests link. Included by
# mpi_coll/CMakeLists.txt (and by tests/unit/algo_tests.cmake when mpi_coll/
# is not part of the build); paths are relative to this file, so either works.
include(${CMAKE_CURRENT_LIST_DIR}/gpu/CMakeLists_gpu.cmake)
if(NOT TARGET dualrail_algo)
  add_library(dualrail_algo STATIC
    ${CMAKE_CURRENT_LIST_DIR}/algo/coll.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/allreduce.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/collectives.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/bcast_binomial.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/bcast_scatter_allgather.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/bcast_chain.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/barrier_dissemination.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/allgather_ring.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/allgather_rd.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/allgather_bruck.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/reductions.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/reduce_binomial.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/reduce_rabenseifner.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/reduce_chain.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/reduce_scatter_ring.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/reduce_scatter_halving.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/gathers.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/allgatherv_ring.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/allgatherv_bruck.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/gather_binomial.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/scatter_binomial.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/gatherv_linear.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/allreduce_ring.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/allreduce_rd.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/allreduce_rd_small.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/engine.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/allreduce_staged.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/staging.cc
    ${CMAKE_CURRENT_LIST_DIR}/dr_coll.cc
    ${CMAKE_CURRENT_LIST_DIR}/dr_coll_gpu.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/alltoall.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/alltoall_pairwise.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/alltoall_bruck.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/alltoallv_pairwise.cc
    ${CMAKE_CURRENT_LIST_DIR}/dr_alltoall.cc
    ${CMAKE_CURRENT_LIST_DIR}/algo/task.cc
    ${CMAKE_CURRENT_LIST_DIR}/dr_coll_nb.cc)
  target_include_directories(dualrail_algo PUBLIC
    ${PROJECT_SOURCE_DIR}/include
    ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(dualrail_algo PUBLIC dualrail_ucx_mr dualrail_gpu)
  # Linked into mca_coll_dualrail.so: nothing of it is exported from there
  # (Open MPI's rule: only mca_coll_dualrail_*); dr_allreduce stays callable
  # from the glue inside the same .so.
  set_target_properties(dualrail_algo PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
endif()

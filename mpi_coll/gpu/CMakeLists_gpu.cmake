# The memory interface (dr_gpu.h): the CUDA implementation when the toolkit
# is there, the host stand-in always. A static PIC library linked into the
# component .so, the algorithm tests and the GPU tests. Included by
# CMakeLists_algo.cmake; paths are relative to this file.
if(NOT TARGET dualrail_gpu)
  # The UCX memory-type query lives with ucx_mr (it reads the planes' contexts);
  # added from here so ucx_mr's own build files stay as they are.
  target_sources(dualrail_ucx_mr PRIVATE ${PROJECT_SOURCE_DIR}/ucx_mr/mr_memtype.cc)
  set(_dr_gpu_src
    ${CMAKE_CURRENT_LIST_DIR}/dr_gpu_common.c
    ${CMAKE_CURRENT_LIST_DIR}/dr_gpu_standin.cc)
  if(DUALRAIL_HAVE_CUDA)
    list(APPEND _dr_gpu_src ${CMAKE_CURRENT_LIST_DIR}/dr_gpu_cuda.cu)
  else()
    list(APPEND _dr_gpu_src ${CMAKE_CURRENT_LIST_DIR}/dr_gpu_nocuda.c)
  endif()
  add_library(dualrail_gpu STATIC ${_dr_gpu_src})
  target_include_directories(dualrail_gpu PUBLIC
    ${PROJECT_SOURCE_DIR}/include
    ${CMAKE_CURRENT_LIST_DIR}/..)
  set_target_properties(dualrail_gpu PROPERTIES
    POSITION_INDEPENDENT_CODE ON
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(DUALRAIL_HAVE_CUDA)
    # The static runtime: the component still loads where no CUDA toolkit is
    # installed; without a driver it reports no GPU.
    target_link_libraries(dualrail_gpu PUBLIC CUDA::cudart_static)
    target_compile_options(dualrail_gpu PRIVATE
      $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-fvisibility=hidden --expt-relaxed-constexpr>)
  endif()
endif()

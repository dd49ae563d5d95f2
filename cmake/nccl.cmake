# The NCCL backend of the communicator (distributed/nccl/communicator_nccl.cc),
# built when SHARDCHECK_WITH_CUDA is ON and both the CUDA toolkit and NCCL
# are found (e.g. /usr/local/cuda). Host code only: g++ compiles it against
# the CUDA runtime API; no nvcc, no kernels. Without them the stub in
# distributed/communicator_nccl.cc makes MakeNcclCommunicator throw.
# Included by CMakeLists.txt after the target shardcheck_distributed exists.

if(SHARDCHECK_WITH_CUDA)
  if(NOT CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  find_package(CUDAToolkit QUIET)
endif()

if(SHARDCHECK_WITH_CUDA AND CUDAToolkit_FOUND)
  find_path(NCCL_INCLUDE_DIR nccl.h
    HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV NCCL_HOME ENV NCCL_ROOT
    PATH_SUFFIXES include)
  find_library(NCCL_LIBRARY nccl
    HINTS ${CUDAToolkit_LIBRARY_DIR} ENV NCCL_HOME ENV NCCL_ROOT
    PATH_SUFFIXES lib lib64)
endif()

if(SHARDCHECK_WITH_CUDA AND CUDAToolkit_FOUND AND NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  message(STATUS "shardcheck: NCCL backend ON (CUDA ${CUDAToolkit_VERSION}, ${NCCL_LIBRARY})")
  target_sources(shardcheck_distributed PRIVATE
    ${CMAKE_CURRENT_SOURCE_DIR}/distributed/nccl/communicator_nccl.cc)
  target_compile_definitions(shardcheck_distributed PRIVATE SHARDCHECK_HAVE_NCCL=1)
  target_include_directories(shardcheck_distributed PRIVATE ${NCCL_INCLUDE_DIR})
  target_link_libraries(shardcheck_distributed PRIVATE CUDA::cudart ${NCCL_LIBRARY})
else()
  message(STATUS "shardcheck: NCCL backend OFF (needs SHARDCHECK_WITH_CUDA, the CUDA toolkit and NCCL)")
endif()

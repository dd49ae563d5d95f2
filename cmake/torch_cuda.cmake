# The torch 2.x + CUDA build (SHARDCHECK_TORCH_CUDA, the `cuda` preset):
# libtorch from pip torch (CMAKE_PREFIX_PATH = torch.utils.cmake_prefix_path,
# SHARDCHECK_TORCH_LIB_DIR = its lib/ folder), CUDA kernels compiled by the
# toolkit's nvcc. Two traps of this build, both measured on these machines
# (docs/gpu.md):
#  - torch's CMake config looks for libtorch.so and libc10.so in the system
#    folders first and finds Debian's libtorch 1.13 when libtorch-dev is
#    installed: the binary then mixes 1.13 and 2.x and aborts at start-up.
#    Every torch library is pinned to SHARDCHECK_TORCH_LIB_DIR below.
#  - torch's default CUDA arch list holds an arch nvcc 13 rejects: the list
#    is set to sm_80 and sm_90 (A100, H100/H200), with sm_90 PTX.
# Included by CMakeLists.txt before find_package(Torch).

if(NOT SHARDCHECK_TORCH_LIB_DIR)
  message(FATAL_ERROR "SHARDCHECK_TORCH_CUDA needs SHARDCHECK_TORCH_LIB_DIR: the lib/ folder of pip torch "
                      "(ci/setup-cuda sets it)")
endif()
foreach(lib torch torch_cpu torch_cuda c10 c10_cuda kineto)
  string(TOUPPER "${lib}" upper)
  set(path "${SHARDCHECK_TORCH_LIB_DIR}/lib${lib}.so")
  if(EXISTS "${path}")
    set(${upper}_LIBRARY "${path}" CACHE FILEPATH "pinned to pip torch (cmake/torch_cuda.cmake)" FORCE)
    set(${lib}_LIBRARY "${path}" CACHE FILEPATH "pinned to pip torch (cmake/torch_cuda.cmake)" FORCE)
  endif()
endforeach()

if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
set(TORCH_CUDA_ARCH_LIST "8.0;9.0+PTX")
set(CMAKE_CUDA_ARCHITECTURES "80-real;90-real;90-virtual")
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
if(CCACHE_PROGRAM)
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
endif()
# No FMA contraction on the device either: the kernels must give the
# reference's bits (docs/optimizers.md). IEEE division and sqrt are nvcc's
# defaults without --use_fast_math; set them explicitly all the same.
set(CMAKE_CUDA_FLAGS "${CMAKE_CUDA_FLAGS} -fmad=false -prec-div=true -prec-sqrt=true -ftz=false")

# pip torch's libtorch.so exports its own copies of libstdc++'s
# std::filesystem functions, and they crash when called from here
# (remove_all through a null pointer: measured). The dynamic linker takes a
# symbol from the first library that defines it, so libstdc++ is made the
# first needed library of every binary.
add_link_options("LINKER:--push-state,--no-as-needed" "-lstdc++" "LINKER:--pop-state")

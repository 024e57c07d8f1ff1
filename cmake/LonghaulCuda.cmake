# CUDA + NCCL are optional: found with check_language(CUDA), never required.
# Sets LONGHAUL_HAVE_CUDA and, when ON, the imported target NCCL::NCCL.
set(LONGHAUL_HAVE_CUDA OFF)
if(LONGHAUL_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)   # "native" fails on machines without a GPU
    endif()
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)  # one cudart, shared with CUDA::cudart
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc's C++20 flag; .cu files are compiled as C++17.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      add_library(NCCL::NCCL UNKNOWN IMPORTED)
      set_target_properties(NCCL::NCCL PROPERTIES IMPORTED_LOCATION "${NCCL_LIBRARY}"
                                                   INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
      set(LONGHAUL_HAVE_CUDA ON)
      message(STATUS "longhaul: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, archs ${CMAKE_CUDA_ARCHITECTURES}, NCCL ${NCCL_LIBRARY}")
    else()
      message(STATUS "longhaul: nvcc found but NCCL missing - CUDA paths disabled")
    endif()
  else()
    message(STATUS "longhaul: no CUDA compiler - CPU paths only")
  endif()
endif()

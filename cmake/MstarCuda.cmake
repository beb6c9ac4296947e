# MSTAR_CUDA=AUTO|ON|OFF decides whether CUDA sources build. The decision is an
# option, never PATH: nvcc is reachable through wrappers on some machines even
# where CUDA is meant to be off. Architecture defaults to sm_90 (H200), never
# "native", which fails on machines without a GPU (CI builds CUDA code there).

set(MSTAR_CUDA_ENABLED OFF)
option(MSTAR_CUDA_PTX_ONLY "Compile device code to PTX only (machines without a GPU)" OFF)
string(TOUPPER "${MSTAR_CUDA}" _mstar_cuda)
if(_mstar_cuda STREQUAL "ON" OR _mstar_cuda STREQUAL "AUTO")
  include(CheckLanguage)
  if(MSTAR_CUDA_PTX_ONLY)
    # PTX alone (no ptxas, no SASS): the device code is still parsed,
    # instantiated and lowered, so a compile error still fails the build,
    # in about 0.7 of the time (attention_split.cu: 21.4 s against 29.8 s).
    # For machines without a GPU, which never run the kernels
    # (scripts/run-tests.sh sets it there); never for one that does.
    set(CMAKE_CUDA_ARCHITECTURES 90-virtual)
  elseif(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    # CMake 3.25 predates nvcc 13 and does not know its C++20 flag; tell it.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    if(MSTAR_CUDA_PTX_ONLY)
      # ...and NVVM at -O0: PTX nobody runs needs no optimising. The front
      # end still parses and instantiates every kernel (attention_split.cu:
      # 12.5 CPU-s against 24.1 with NVVM's default -O3).
      add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:SHELL:-Xcicc -O0>")
    endif()
    find_package(CUDAToolkit REQUIRED)
    set(MSTAR_CUDA_ENABLED ON)
  elseif(_mstar_cuda STREQUAL "ON")
    message(FATAL_ERROR "MSTAR_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER "
                        "or install the CUDA toolkit); use MSTAR_CUDA=AUTO or OFF for a CPU build")
  else()
    message(STATUS "MSTAR_CUDA=AUTO: no CUDA compiler found, building the CPU version only")
  endif()
elseif(NOT _mstar_cuda STREQUAL "OFF")
  message(FATAL_ERROR "MSTAR_CUDA must be AUTO, ON or OFF, got '${MSTAR_CUDA}'")
endif()

# MSTAR_NCCL=AUTO|ON|OFF: NCCL for tensor parallelism across GPUs (issue 18),
# looked for only when CUDA builds; never required by AUTO. MSTAR_NCCL_ENABLED
# says whether it was found; with it, parallel/ builds the NCCL group
# (mstar::parallel_nccl) and the GPU tests test it.
set(MSTAR_NCCL "AUTO" CACHE STRING "Use NCCL for tensor parallelism on CUDA: AUTO, ON, OFF")
set_property(CACHE MSTAR_NCCL PROPERTY STRINGS AUTO ON OFF)
set(MSTAR_NCCL_ENABLED OFF)
string(TOUPPER "${MSTAR_NCCL}" _mstar_nccl)
if(NOT _mstar_nccl MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "MSTAR_NCCL must be AUTO, ON or OFF, got '${MSTAR_NCCL}'")
endif()
if(MSTAR_CUDA_ENABLED AND NOT _mstar_nccl STREQUAL "OFF")
  find_package(NCCL QUIET)
  if(NCCL_FOUND)
    set(MSTAR_NCCL_ENABLED ON)
    message(STATUS "NCCL ${NCCL_VERSION}: ${NCCL_LIBRARY}")
  elseif(_mstar_nccl STREQUAL "ON")
    message(FATAL_ERROR "MSTAR_NCCL=ON but NCCL was not found (set NCCL_ROOT)")
  else()
    message(STATUS "MSTAR_NCCL=AUTO: NCCL not found; tensor parallelism runs on the CPU only")
  endif()
elseif(_mstar_nccl STREQUAL "ON")
  message(FATAL_ERROR "MSTAR_NCCL=ON needs CUDA (MSTAR_CUDA=AUTO or ON with a CUDA compiler)")
endif()

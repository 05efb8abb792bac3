# Dependencies, all from Debian packages (scripts/install_deps.sh installs them).
# Sets DS_DEP_TARGETS (link), DS_DEP_DEFINES, DS_HAVE_MPI, DS_HAVE_CUDA.

find_package(cJSON REQUIRED)        # libcjson-dev
find_package(dlpack REQUIRED)       # libdlpack-dev (header only)
find_package(OpenMP REQUIRED COMPONENTS C CXX)
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)

if(NOT TARGET cjson)
  message(FATAL_ERROR "cJSON found but its 'cjson' target is missing")
endif()

set(DS_DEP_TARGETS cjson dlpack::dlpack
    OpenMP::OpenMP_CXX OpenMP::OpenMP_C Threads::Threads)
set(DS_DEP_DEFINES "")

# --- GEMM engines of the built-in layers (kernels/nn_gemm.h) ----------------
# oneDNN (libdnnl-dev; Debian's CMake package also wants ocl-icd-opencl-dev)
# runs the matmuls; OpenBLAS (libopenblas-dev) is the fallback. OpenBLAS is
# not linked: the kernels dlopen it at first use, after setting
# OPENBLAS_CORETYPE (see kernels/cpu/gemm_openblas.cpp), so only its soname
# is recorded here. Without either, a blocked C++ loop runs.
set(DS_WITH_ONEDNN AUTO CACHE STRING "Run matmuls on oneDNN: AUTO (if found), ON or OFF")
set(DS_WITH_OPENBLAS AUTO CACHE STRING "OpenBLAS as the GEMM fallback: AUTO (if found), ON or OFF")
set_property(CACHE DS_WITH_ONEDNN PROPERTY STRINGS AUTO ON OFF)
set_property(CACHE DS_WITH_OPENBLAS PROPERTY STRINGS AUTO ON OFF)

set(DS_HAVE_ONEDNN OFF)
if(NOT DS_WITH_ONEDNN STREQUAL "OFF")
  if(DS_WITH_ONEDNN STREQUAL "ON")
    find_package(dnnl REQUIRED)
  else()
    find_package(dnnl QUIET)
  endif()
  if(dnnl_FOUND AND TARGET DNNL::dnnl)
    set(DS_HAVE_ONEDNN ON)
    list(APPEND DS_DEP_TARGETS DNNL::dnnl)
    list(APPEND DS_DEP_DEFINES DS_WITH_ONEDNN=1)
  endif()
endif()

set(DS_HAVE_OPENBLAS OFF)
if(NOT DS_WITH_OPENBLAS STREQUAL "OFF")
  find_library(DS_OPENBLAS_LIBRARY NAMES openblas)
  if(DS_OPENBLAS_LIBRARY)
    get_filename_component(_ds_ob_dir ${DS_OPENBLAS_LIBRARY} DIRECTORY)
    if(EXISTS ${_ds_ob_dir}/libopenblas.so.0)
      set(DS_OPENBLAS_SONAME libopenblas.so.0)   # what the runtime package installs
    else()
      set(DS_OPENBLAS_SONAME ${DS_OPENBLAS_LIBRARY})
    endif()
    set(DS_HAVE_OPENBLAS ON)
    list(APPEND DS_DEP_TARGETS ${CMAKE_DL_LIBS})
    list(APPEND DS_DEP_DEFINES DS_WITH_OPENBLAS=1 "DS_OPENBLAS_SONAME=\"${DS_OPENBLAS_SONAME}\"")
  elseif(DS_WITH_OPENBLAS STREQUAL "ON")
    message(FATAL_ERROR "DS_WITH_OPENBLAS=ON but libopenblas was not found (apt-get install libopenblas-dev)")
  endif()
endif()
message(STATUS "GEMM engines: oneDNN ${DS_HAVE_ONEDNN}, OpenBLAS ${DS_HAVE_OPENBLAS} (${DS_OPENBLAS_SONAME})")

# --- MPI (optional) --------------------------------------------------------
set(DS_HAVE_MPI OFF)
if(NOT DS_WITH_MPI STREQUAL "OFF")
  if(DS_WITH_MPI STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS C)
  else()
    find_package(MPI QUIET COMPONENTS C)
  endif()
  if(MPI_C_FOUND)
    set(DS_HAVE_MPI ON)
    list(APPEND DS_DEP_TARGETS MPI::MPI_C)
    list(APPEND DS_DEP_DEFINES DS_WITH_MPI=1)
  endif()
endif()

# --- CUDA toolkit with NCCL and cuBLAS (optional) --------------------------
set(DS_HAVE_CUDA OFF)
if(NOT DS_WITH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(DS_WITH_CUDA STREQUAL "ON")
    find_package(CUDAToolkit REQUIRED)
  else()
    find_package(CUDAToolkit QUIET)
  endif()
  if(CUDAToolkit_FOUND AND CMAKE_CUDA_COMPILER)
    find_library(DS_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
    find_path(DS_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(DS_NCCL_LIBRARY AND DS_NCCL_INCLUDE_DIR AND TARGET CUDA::cublas)
      set(DS_HAVE_CUDA ON)
    elseif(DS_WITH_CUDA STREQUAL "ON" AND NOT TARGET CUDA::cublas)
      message(FATAL_ERROR "DS_WITH_CUDA=ON but cuBLAS was not found in the CUDA toolkit")
    elseif(DS_WITH_CUDA STREQUAL "ON")
      message(FATAL_ERROR "DS_WITH_CUDA=ON but NCCL was not found in the CUDA toolkit")
    endif()
  elseif(DS_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DS_WITH_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
if(DS_HAVE_CUDA)
  enable_language(CUDA)
  # The architectures of kernels/cuda and tests/gpu: sm_80 (A100) and sm_90
  # (H100/H200) machine code plus compute_90 PTX, which the driver JITs for
  # newer GPUs. A project variable rather than CMAKE_CUDA_ARCHITECTURES,
  # which enable_language fills with nvcc's own default (75 for CUDA 13).
  set(DS_CUDA_ARCHITECTURES "80-real;90" CACHE STRING "CUDA architectures of the CUDA kernels")
  add_library(ds_nccl UNKNOWN IMPORTED)
  set_target_properties(ds_nccl PROPERTIES IMPORTED_LOCATION ${DS_NCCL_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${DS_NCCL_INCLUDE_DIR})
  # cuBLAS: the dense products of the CUDA kernel table (kernels/cuda/gemm*.cpp).
  list(APPEND DS_DEP_TARGETS CUDA::cudart CUDA::cublas ds_nccl)
  list(APPEND DS_DEP_DEFINES DS_WITH_CUDA=1)
  set(DS_CUDA_VERSION "${CUDAToolkit_VERSION}")
endif()

# LibTorch from a PyTorch wheel, CPU only.
#
# ENCODER_TORCH_WHEEL names the `torch` package directory of a Python
# environment (what `python -c 'import torch, os; print(os.path.dirname(
# torch.__file__))'` prints). The wheels on PyPI are CUDA builds, and their
# CMake config refuses to configure without a CUDA toolkit; this module
# instead imports the two libraries a CPU build needs (torch_cpu and c10),
# so the same wheel serves CPU machines with no toolkit. The CUDA build goes
# through the wheel's own config (scripts/cuda_build.sh).
#
# Defines the imported target `torch` and the variables the rest of the
# tree reads from TorchConfig.cmake: TORCH_LIBRARIES, TORCH_INCLUDE_DIRS
# and TORCH_CUDA_LIBRARIES (empty); CMakeLists.txt reads the version from the
# headers.
set(_wheel "${ENCODER_TORCH_WHEEL}")
foreach(_lib torch_cpu c10)
  find_library(ENCODER_${_lib}_LIBRARY ${_lib} PATHS "${_wheel}/lib"
               NO_DEFAULT_PATH REQUIRED)
endforeach()
if(NOT EXISTS "${_wheel}/include/torch/csrc/api/include")
  message(FATAL_ERROR "ENCODER_TORCH_WHEEL=${_wheel} has no LibTorch headers")
endif()
# The wheel's include/ also carries fmt 12, which would shadow Debian's fmt 9
# (cmake/torch_include_staging.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/torch_include_staging.cmake)
set(_staged "${CMAKE_BINARY_DIR}/torch-include")
encoder_stage_torch_include("${_wheel}/include" "${_staged}")
set(TORCH_INCLUDE_DIRS "${_staged}" "${_staged}/torch/csrc/api/include")

add_library(encoder_torch_c10 SHARED IMPORTED)
set_target_properties(encoder_torch_c10 PROPERTIES
  IMPORTED_LOCATION "${ENCODER_c10_LIBRARY}")
add_library(torch SHARED IMPORTED)
set_target_properties(torch PROPERTIES
  IMPORTED_LOCATION "${ENCODER_torch_cpu_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}"
  INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1"
  INTERFACE_LINK_LIBRARIES "encoder_torch_c10")
set(TORCH_LIBRARIES torch)
set(TORCH_CUDA_LIBRARIES "")
message(STATUS "LibTorch (CPU) from the wheel at ${_wheel}")

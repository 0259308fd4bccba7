# LibTorch headers seen without the fmt/ that a PyTorch wheel ships.
#
# A wheel's torch/include carries fmt 12 beside LibTorch's own headers; put
# on the include path, it shadows Debian's fmt 9 that spdlog is built
# against. LibTorch's headers that spdlog-using sources reach do not include
# fmt, so they are seen through a directory of links to every entry of
# include/ but fmt/.

# encoder_stage_torch_include(<include dir> <staged dir>): (re)makes
# <staged dir> as links to every entry of <include dir> except fmt/.
function(encoder_stage_torch_include include_dir staged)
  file(REMOVE_RECURSE "${staged}")
  file(MAKE_DIRECTORY "${staged}")
  file(GLOB _entries RELATIVE "${include_dir}" "${include_dir}/*")
  foreach(_entry IN LISTS _entries)
    if(NOT _entry STREQUAL "fmt")
      file(CREATE_LINK "${include_dir}/${_entry}" "${staged}/${_entry}"
           SYMBOLIC)
    endif()
  endforeach()
endfunction()

# encoder_torch_include_without_fmt(): after find_package(Torch) found a
# wheel's config (the CUDA build, scripts/cuda_build.sh), points
# TORCH_INCLUDE_DIRS and the include directories of the imported LibTorch
# targets at ${CMAKE_BINARY_DIR}/torch-include, a staged copy of
# ${TORCH_INSTALL_PREFIX}/include without fmt/. Does nothing when that
# include/ has no fmt/ or is one of the compiler's own include directories
# (Debian's libtorch-dev in /usr/include, whose fmt is the system's).
function(encoder_torch_include_without_fmt)
  set(_include "${TORCH_INSTALL_PREFIX}/include")
  get_filename_component(_real "${_include}" REALPATH)
  if(NOT IS_DIRECTORY "${_real}/fmt")
    return()
  endif()
  foreach(_dir IN LISTS CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
    get_filename_component(_dir "${_dir}" REALPATH)
    if(_dir STREQUAL _real)
      return()
    endif()
  endforeach()
  set(_staged "${CMAKE_BINARY_DIR}/torch-include")
  encoder_stage_torch_include("${_real}" "${_staged}")

  # Maps one include directory list: entries at or under ${_real} move to
  # the staged directory, anything else (generator expressions included)
  # stays as it is.
  macro(_encoder_restage out dirs)
    set(${out} "")
    foreach(_d IN ITEMS ${dirs})
      if(_d MATCHES "^\\$<" OR NOT IS_ABSOLUTE "${_d}")
        list(APPEND ${out} "${_d}")
        continue()
      endif()
      get_filename_component(_r "${_d}" REALPATH)
      string(FIND "${_r}/" "${_real}/" _at)
      if(_at EQUAL 0)
        string(LENGTH "${_real}" _len)
        string(SUBSTRING "${_r}" ${_len} -1 _rest)
        list(APPEND ${out} "${_staged}${_rest}")
      else()
        list(APPEND ${out} "${_d}")
      endif()
    endforeach()
  endmacro()

  foreach(_target torch torch_cpu torch_cuda c10 c10_cuda torch_nvshmem
                  headeronly)
    if(NOT TARGET ${_target})
      continue()
    endif()
    foreach(_prop INTERFACE_INCLUDE_DIRECTORIES
                  INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)
      get_target_property(_dirs ${_target} ${_prop})
      if(_dirs)
        _encoder_restage(_new "${_dirs}")
        set_target_properties(${_target} PROPERTIES ${_prop} "${_new}")
      endif()
    endforeach()
  endforeach()
  _encoder_restage(_new "${TORCH_INCLUDE_DIRS}")
  set(TORCH_INCLUDE_DIRS "${_new}" PARENT_SCOPE)
  message(STATUS "LibTorch headers without fmt/: ${_staged}")
endfunction()

# CBLAS for float32/float64 matmul (engine/cpu/blas.c): TENET_BLAS = AUTO | ON | OFF.
#
#   AUTO (default)  OpenBLAS if found, else tenet's own kernel only
#   ON              OpenBLAS required: configuring fails without it
#   OFF             never
#
# OpenBLAS is looked for as the pkg-config module `openblas` (Debian: libopenblas-dev; the
# OpenMP flavour libopenblas0-openmp shares our OpenMP runtime, so its threads and ours do
# not fight), then as a plain library `openblas` with a `cblas.h`. When found, tenet_obj gets
# TENET_HAVE_CBLAS=1 and both libraries link it PUBLIC (the static one needs it at its
# consumers' link). A pkg-config find goes through tenet_pkg_dep, so the installed tenet.pc
# and tenetConfig.cmake require it too; a plain-library find is passed to tenet.pc's
# Libs.private through TENET_BLAS_PC_LIBS.
#
# AUTO stays off under ThreadSanitizer: OpenBLAS and its OpenMP runtime are not instrumented,
# so TSan would not see the synchronisation of their threads and would report false races on
# every product (ON still forces it).
#
# Include after add_library(tenet_obj OBJECT ...) and before the libraries; link libraries
# are added with tenet_link() (CMakeLists.txt).

set(TENET_BLAS AUTO CACHE STRING "CBLAS (OpenBLAS) for float matmul: AUTO, ON or OFF")
set_property(CACHE TENET_BLAS PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${TENET_BLAS}" _tenet_blas_mode)
if(_tenet_blas_mode MATCHES "^(ON|YES|TRUE|Y|1)$")
  set(_tenet_blas_mode ON)
elseif(_tenet_blas_mode MATCHES "^(OFF|NO|FALSE|N|0)$")
  set(_tenet_blas_mode OFF)
elseif(NOT _tenet_blas_mode STREQUAL "AUTO")
  message(FATAL_ERROR "TENET_BLAS must be AUTO, ON or OFF (got '${TENET_BLAS}')")
endif()
if(_tenet_blas_mode STREQUAL "AUTO" AND TENET_SANITIZE STREQUAL "thread")
  message(STATUS "CBLAS: off under ThreadSanitizer (TENET_BLAS=ON to force it)")
  set(_tenet_blas_mode OFF)
endif()

set(TENET_BLAS_FOUND OFF)
set(TENET_BLAS_PC_LIBS "")
set(_tenet_blas_link "")
if(NOT _tenet_blas_mode STREQUAL "OFF")
  include(CheckSymbolExists)
  pkg_check_modules(OPENBLAS QUIET IMPORTED_TARGET openblas)
  if(OPENBLAS_FOUND)
    set(_tenet_blas_link PkgConfig::OPENBLAS)
    set(_tenet_blas_from "pkg-config openblas ${OPENBLAS_VERSION}")
  else()
    find_library(TENET_OPENBLAS_LIBRARY NAMES openblas)
    find_path(TENET_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas)
    if(TENET_OPENBLAS_LIBRARY AND TENET_CBLAS_INCLUDE_DIR)
      # A plain path and include dir, not an imported target: the exported targets then
      # carry the path itself and need nothing recreated at the consumer.
      set(_tenet_blas_link ${TENET_OPENBLAS_LIBRARY})
      set(_tenet_blas_from "${TENET_OPENBLAS_LIBRARY}")
    endif()
  endif()

  # Both routes: the header must declare, and the library define, what blas.c calls.
  if(_tenet_blas_link)
    set(CMAKE_REQUIRED_QUIET ON)
    set(CMAKE_REQUIRED_LIBRARIES ${_tenet_blas_link})
    set(CMAKE_REQUIRED_INCLUDES ${OPENBLAS_INCLUDE_DIRS} ${TENET_CBLAS_INCLUDE_DIR})
    check_symbol_exists(cblas_sgemm cblas.h TENET_CBLAS_LINKS)
    # OpenBLAS's thread controls (absent from a plain netlib cblas.h)
    check_symbol_exists(openblas_set_num_threads cblas.h TENET_OPENBLAS_HAS_THREADS)
    unset(CMAKE_REQUIRED_LIBRARIES)
    unset(CMAKE_REQUIRED_INCLUDES)
    unset(CMAKE_REQUIRED_QUIET)
    if(TENET_CBLAS_LINKS)
      set(TENET_BLAS_FOUND ON)
    endif()
  endif()

  if(NOT TENET_BLAS_FOUND AND _tenet_blas_mode STREQUAL "ON")
    message(FATAL_ERROR "TENET_BLAS=ON but OpenBLAS was not found (pkg-config module "
      "'openblas', or library 'openblas' with cblas.h); on Debian: apt-get install "
      "libopenblas-dev libopenblas-openmp-dev libopenblas0-openmp")
  endif()
endif()

if(TENET_BLAS_FOUND)
  message(STATUS "CBLAS: OpenBLAS (${_tenet_blas_from}) for float32/float64 matmul")
  target_compile_definitions(tenet_obj PRIVATE TENET_HAVE_CBLAS=1)
  if(TENET_OPENBLAS_HAS_THREADS)
    target_compile_definitions(tenet_obj PRIVATE TENET_HAVE_OPENBLAS_THREADS=1)
  endif()
  if(OPENBLAS_FOUND)
    tenet_pkg_dep(OPENBLAS openblas)
  else()
    target_include_directories(tenet_obj PRIVATE ${TENET_CBLAS_INCLUDE_DIR})
    set(TENET_BLAS_PC_LIBS " ${TENET_OPENBLAS_LIBRARY}") # appended to Libs.private as is
  endif()
  tenet_link(${_tenet_blas_link})
else()
  message(STATUS "CBLAS: not used (TENET_BLAS=${TENET_BLAS}); matmul runs tenet's own kernel")
endif()

# cmake/cuda.cmake — the optional CUDA backend (engine/cuda/).
#
# Included from CMakeLists.txt right after tenet_obj and its compile options,
# before the libraries. TENET_CUDA: AUTO (default: on when nvcc is found), ON
# (fail without nvcc) or OFF. Sets TENET_HAVE_CUDA for the rest of the build
# (the tests use it).
#
# The back end's objects (tenet_cuda_obj) go two ways (docs/design.md, "Back
# ends as plugins"):
#  - the plugin libtenet-cuda.so (target tenet-cuda, plus plugin.cu), the only
#    thing that links the CUDA libraries for libtenet.so, which dlopens it on
#    the first use of a CUDA device;
#  - the static library (plus register.cu, which registers the table from a
#    constructor): TENET_STATIC_OBJECTS, and TENET_STATIC_LINK for its links.
# The .cu files include the engine's C headers as C++ (extern "C" guards).

set(TENET_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO (when nvcc is found), ON or OFF")
set_property(CACHE TENET_CUDA PROPERTY STRINGS AUTO ON OFF)

set(TENET_HAVE_CUDA OFF)
string(TOUPPER "${TENET_CUDA}" _tenet_cuda_mode)
if(_tenet_cuda_mode MATCHES "^(ON|YES|TRUE|Y|1)$")
  set(_tenet_cuda_want ON)
  set(_tenet_cuda_required ON)
elseif(_tenet_cuda_mode MATCHES "^(OFF|NO|FALSE|N|0)$")
  set(_tenet_cuda_want OFF)
  message(STATUS "tenet: CUDA backend off (TENET_CUDA=${TENET_CUDA})")
elseif(_tenet_cuda_mode STREQUAL "AUTO")
  set(_tenet_cuda_want ON)
  set(_tenet_cuda_required OFF)
else()
  message(FATAL_ERROR "TENET_CUDA must be AUTO, ON or OFF (got '${TENET_CUDA}')")
endif()

if(_tenet_cuda_want)
  # Hopper by default: sm_90 machine code plus compute_90 PTX, which newer
  # GPUs JIT-compile. Must be set before the language is enabled, or CMake
  # picks the compiler's default architecture.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING
        "CUDA architectures to build for (90: sm_90 code + compute_90 PTX)" FORCE)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(TENET_HAVE_CUDA ON)
  elseif(_tenet_cuda_required)
    message(FATAL_ERROR "TENET_CUDA=ON but no CUDA compiler (nvcc) was found; put nvcc on PATH "
                        "or set CMAKE_CUDA_COMPILER, or configure with -DTENET_CUDA=OFF")
  else()
    message(STATUS "tenet: no CUDA compiler found, building without the CUDA backend")
  endif()
endif()

if(TENET_HAVE_CUDA)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # libcudart.so for every target made from here on (the tests, which CMake
  # links as CUDA programs through tenet_static): one runtime per process.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  message(STATUS "tenet: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES})")

  file(GLOB TENET_CUDA_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/engine/cuda/*.cu)
  # the two ways the table reaches core: one each
  list(FILTER TENET_CUDA_SOURCES EXCLUDE REGEX "/(plugin|register)\\.cu$")
  add_library(tenet_cuda_obj OBJECT ${TENET_CUDA_SOURCES})
  add_library(tenet_cuda_register OBJECT ${PROJECT_SOURCE_DIR}/engine/cuda/register.cu)
  add_library(tenet-cuda MODULE $<TARGET_OBJECTS:tenet_cuda_obj>
    ${PROJECT_SOURCE_DIR}/engine/cuda/plugin.cu)
  set(_tenet_cuda_targets tenet_cuda_obj tenet_cuda_register tenet-cuda)
  # core asks for the plugin (engine/core/backend.c)
  target_compile_definitions(tenet_obj PRIVATE TENET_HAVE_CUDA=1)
  foreach(_t ${_tenet_cuda_targets})
    # engine/cuda/*.cu reach the core headers relatively ("../core/backend.h")
    target_include_directories(${_t} PRIVATE ${PROJECT_SOURCE_DIR}/include
      ${PROJECT_SOURCE_DIR}/engine/cuda)
    target_compile_definitions(${_t} PRIVATE TENET_HAVE_CUDA=1)
    set_target_properties(${_t} PROPERTIES
      CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}"
      CUDA_STANDARD 17
      CUDA_STANDARD_REQUIRED ON
      CUDA_EXTENSIONS OFF
      # hidden: the plugin exports its entry only (and the version script
      # below makes sure); the static library's internals stay internal
      CUDA_VISIBILITY_PRESET hidden
      VISIBILITY_INLINES_HIDDEN ON
      # libcudart.so, as every target that links CUDA here: never two
      # runtimes in one process.
      CUDA_RUNTIME_LIBRARY Shared)
  endforeach()

  # nvcc gets its own options (tenet_obj's are GCC flags nvcc rejects).

  # -O3 whatever the build type, as the C sources get: drop the -O of the
  # configuration flags, which nvcc would otherwise warn about as a
  # conflicting redefinition.
  foreach(_cfg "" _DEBUG _RELEASE _RELWITHDEBINFO _MINSIZEREL)
    string(REGEX REPLACE "(^| )-O[0-3s]( |$)" " " CMAKE_CUDA_FLAGS${_cfg}
           "${CMAKE_CUDA_FLAGS${_cfg}}")
  endforeach()

  # CUDA flags:
  #  --fmad=false: no fused multiply-adds, so a*b + c rounds as the CPU kernels
  #    (built without contraction) do; the results are compared at tight
  #    tolerance, and the optimisers' updates agree bit for bit. No
  #    --use_fast_math for the same reason (IEEE division and sqrt, denormals).
  #  -fno-exceptions, -fno-rtti: nothing throws; no unwinding tables or
  #    type information for the host code.
  foreach(_t ${_tenet_cuda_targets})
    target_compile_options(${_t} PRIVATE -O3 --fmad=false -Xcompiler=-fPIC
      -Xcompiler=-fno-exceptions -Xcompiler=-fno-rtti -Xcompiler=-Wall)
    if(TENET_WERROR)
      target_compile_options(${_t} PRIVATE -Werror=all-warnings -Xcompiler=-Werror)
    endif()
  endforeach()

  # The host code nvcc generates for template kernels uses the C++ runtime
  # (thread-safe static initialisation: __cxa_guard_*), and C programs are
  # linked by the C compiler, which does not add it: link the host C++
  # compiler's own libraries beyond the C ones (with GCC: stdc++).
  set(TENET_CUDA_CXX_LIBS ${CMAKE_CUDA_IMPLICIT_LINK_LIBRARIES})
  if(TENET_CUDA_CXX_LIBS)
    list(REMOVE_ITEM TENET_CUDA_CXX_LIBS ${CMAKE_C_IMPLICIT_LINK_LIBRARIES} m)
    list(FILTER TENET_CUDA_CXX_LIBS EXCLUDE REGEX "cuda|cudart|cudadevrt")
    list(REMOVE_DUPLICATES TENET_CUDA_CXX_LIBS)
  endif()
  set(TENET_CUDA_LINK CUDA::cudart CUDA::cublas ${TENET_CUDA_CXX_LIBS})

  # For the pkg-config file's Libs.private (the static library's consumers).
  # no -L: the CUDA toolkit's directory is the build machine's; a static link adds its own
  set(TENET_CUDA_PC_LIBS "-lcublas -lcublasLt -lcudart")
  foreach(_lib IN LISTS TENET_CUDA_CXX_LIBS)
    string(APPEND TENET_CUDA_PC_LIBS " -l${_lib}")
  endforeach()

  # The plugin: libtenet-cuda.so (MODULE: loaded, never linked), beside
  # libtenet.so in the build tree and installed beside it, exporting
  # tn_cuda_plugin_init only.
  set_target_properties(tenet-cuda PROPERTIES
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}
    LINKER_LANGUAGE CUDA)
  target_link_libraries(tenet-cuda PRIVATE ${TENET_CUDA_LINK})
  target_link_options(tenet-cuda PRIVATE
    "LINKER:--version-script=${PROJECT_SOURCE_DIR}/engine/cuda/plugin.map" "LINKER:-z,defs")
  set_property(TARGET tenet-cuda APPEND PROPERTY LINK_DEPENDS
    ${PROJECT_SOURCE_DIR}/engine/cuda/plugin.map)
  # a plugin, not a library to link: in tenet's own directory (found there by libtenet.so)
  install(TARGETS tenet-cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/tenet COMPONENT cuda)

  # The static library: the same objects, registered from a constructor.
  list(APPEND TENET_STATIC_OBJECTS $<TARGET_OBJECTS:tenet_cuda_obj>
    $<TARGET_OBJECTS:tenet_cuda_register>)
  list(APPEND TENET_STATIC_TARGETS tenet_cuda_obj tenet_cuda_register)
  list(APPEND TENET_STATIC_LINK ${TENET_CUDA_LINK})
endif()

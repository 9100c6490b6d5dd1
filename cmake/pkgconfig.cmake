# The pkg-config files: tenet.pc and, with tenet_mpi, tenet-mpi.pc (installed with the dev
# component). Included from CMakeLists.txt once the dependencies are known.
#
# tenet.pc's Cflags are -I${includedir} and nothing else: the public headers include only the C
# library's (tests/check_cxx_headers.sh compiles each alone), so a program needs no dependency's
# include dir. The dependencies are private (the shared library links them itself) and go to
# Libs.private, for a static link, as -l flags (and flags such as -pthread): no -L and no
# absolute path, which would be the build machine's (its CUDA toolkit, a library found by path).
# Not through Requires.private: pkg-config 0.29 and pkgconf 1.8 (Debian 12) add the Cflags of
# Requires.private modules to every `--cflags`, so jemalloc's, libunwind's, cJSON's and
# OpenBLAS's include dirs would reach every program built against tenet. The check:
# tests/check_pkgconfig.sh (ctest pkgconfig; scripts/check-packages on the installed package).

# tenet.pc finds its prefix relative to itself, so `cmake --install --prefix` relocates it.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(TENET_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(TENET_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(TENET_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH _rel "/${TENET_PC_DIR}" "/")
  string(REGEX REPLACE "/$" "" _rel "${_rel}")
  set(TENET_PC_PREFIX "\${pcfiledir}/${_rel}")
  set(TENET_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(TENET_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()

# Appends to the list `out` the link flags in ARGN that name no path: -lfoo and flags such as
# -pthread stay; -L..., absolute paths (a library given by its file becomes -l<name>) and flags
# carrying one (-Wl,-rpath,/opt/...) go.
function(tenet_pc_flags out)
  set(flags ${${out}})
  foreach(f IN LISTS ARGN)
    if(IS_ABSOLUTE "${f}" AND f MATCHES "/lib([^/]+)\\.(a|so)(\\.[0-9.]+)?$")
      list(APPEND flags "-l${CMAKE_MATCH_1}")
    elseif(NOT f MATCHES "^-L" AND NOT f MATCHES "(^|[=,:])/")
      list(APPEND flags "${f}")
    endif()
  endforeach()
  set(${out} ${flags} PARENT_SCOPE)
endfunction()

# Libs.private: what libtenet.a itself calls. Each pkg-config dependency's own libraries
# (pkg_check_modules' <PREFIX>_LIBRARIES and _LDFLAGS_OTHER: its Libs), then the plain libraries.
# Not a dependency's static closure (<PREFIX>_STATIC_...: its Libs.private too, as libdw's -lbz2
# or OpenBLAS's -lgfortran): a static libtenet.a links those dependencies' shared libraries, which
# bring their own, and the closure would need -dev packages libtenet-dev does not depend on. A
# library listed twice keeps its last place, so that it still follows every library that needs
# it in a static link.
set(_libs "")
set(_deps ${TENET_PKG_DEPS})
while(_deps)
  list(POP_FRONT _deps _prefix _module)
  foreach(_lib IN LISTS ${_prefix}_LIBRARIES)
    list(APPEND _libs "-l${_lib}")
  endforeach()
  tenet_pc_flags(_libs ${${_prefix}_LDFLAGS_OTHER})
endwhile()
separate_arguments(_blas UNIX_COMMAND "${TENET_BLAS_PC_LIBS}") # a library found by path
tenet_pc_flags(_libs ${_blas})
if(TENET_HAVE_CUDA)
  separate_arguments(_cuda UNIX_COMMAND "${TENET_CUDA_PC_LIBS}")
  tenet_pc_flags(_libs ${_cuda})
endif()
if(TENET_OPENMP)
  separate_arguments(_omp UNIX_COMMAND "${OpenMP_C_FLAGS}")
  tenet_pc_flags(_libs ${_omp})
endif()
foreach(_lib IN LISTS CMAKE_DL_LIBS)
  list(APPEND _libs "-l${_lib}")
endforeach()
tenet_pc_flags(_libs ${CMAKE_THREAD_LIBS_INIT} -lm)
list(REVERSE _libs)
list(REMOVE_DUPLICATES _libs)
list(REVERSE _libs)
list(JOIN _libs " " TENET_PC_LIBS_PRIVATE)
configure_file(cmake/tenet.pc.in ${PROJECT_BINARY_DIR}/tenet.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tenet.pc DESTINATION ${TENET_PC_DIR} COMPONENT dev)

if(TENET_HAVE_MPI) # tenet-mpi.pc: tenet plus the MPI compiler's flags
  pkg_check_modules(TENET_OMPI_PC QUIET ompi-c)
  set(TENET_MPI_PC_REQUIRES "")
  if(TENET_OMPI_PC_FOUND) # Debian's OpenMPI has a pkg-config module: name it, not its paths
    set(TENET_MPI_PC_REQUIRES " ompi-c")
  endif()
  set(TENET_MPI_PC_CFLAGS "")
  set(TENET_MPI_PC_LIBS "")
  if(NOT TENET_OMPI_PC_FOUND)
    foreach(dir ${MPI_C_INCLUDE_DIRS})
      string(APPEND TENET_MPI_PC_CFLAGS " -I${dir}")
    endforeach()
    foreach(lib ${MPI_C_LIBRARIES})
      string(APPEND TENET_MPI_PC_LIBS " ${lib}")
    endforeach()
  endif()
  configure_file(cmake/tenet-mpi.pc.in ${PROJECT_BINARY_DIR}/tenet-mpi.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/tenet-mpi.pc DESTINATION ${TENET_PC_DIR} COMPONENT dev)
endif()

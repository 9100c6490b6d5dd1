# Debian packages of an installed tenet (CPack's DEB generator; scripts/package builds them):
#   libtenet0       runtime  libtenet.so.0 (SONAME; docs/design.md, "Versions and ABI")
#   libtenet-cuda0  cuda     libtenet-cuda.so, the CUDA back end libtenet.so loads on first use
#   libtenet-mpi0   mpi      libtenet_mpi.so.0, collectives and DDP over MPI
#   libtenet-dev    dev      headers, static libraries, .so links, CMake package, pkg-config files
# The runtime packages' dependencies on Debian's libraries come from dpkg-shlibdeps (libjemalloc2,
# libunwind8, libdw1, libcjson1, libopenblas0, libgomp1, ...); the CUDA runtime is NVIDIA's
# (not a Debian package here), so libtenet-cuda0 names it in its description instead.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tenet)
set(CPACK_PACKAGE_VENDOR "tenet")
set(CPACK_PACKAGE_CONTACT "tenet maintainers <maintainers@tenet.dev>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "lock-free multithreaded tensor engine with autograd")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://localhost/tenet")
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# dpkg-shlibdeps looks for libtenet.so.0 (libtenet-mpi0's dependency) in the build tree
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR})

set(TENET_DEB_VERSION "${PROJECT_VERSION}")
set(CPACK_COMPONENTS_ALL runtime dev)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libtenet${PROJECT_VERSION_MAJOR})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
# the dev package carries tenet-prof and tenet-diverge (examples/CMakeLists.txt): their
# shared libraries (libc, cJSON, OpenMP, ...) become its dependencies too
set(CPACK_DEBIAN_DEV_PACKAGE_SHLIBDEPS ON)
# the shared libraries' ldconfig runs from a trigger, as Debian's policy asks
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/cmake/deb/triggers)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
  "tenet: a C11 tensor engine with PyTorch's semantics and autograd
 Reverse-mode autograd and debug instrumentation (anomaly mode, race
 detector, gradient monitor, timeline profiler). The shared library.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libtenet-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_ARCHITECTURE amd64)
set(TENET_DEV_DEPENDS "libtenet${PROJECT_VERSION_MAJOR} (= ${TENET_DEB_VERSION}), libjemalloc-dev, libunwind-dev, libdw-dev, libcjson-dev, zlib1g-dev, libopenblas-dev, libdlpack-dev, pkg-config")
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "tenet: development files
 Headers, static libraries, the CMake package tenet::tenet and the
 pkg-config files tenet.pc and tenet-mpi.pc.")

if(TENET_HAVE_CUDA)
  list(APPEND CPACK_COMPONENTS_ALL cuda)
  set(CPACK_DEBIAN_CUDA_PACKAGE_NAME libtenet-cuda${PROJECT_VERSION_MAJOR})
  set(CPACK_DEBIAN_CUDA_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS "libtenet${PROJECT_VERSION_MAJOR} (= ${TENET_DEB_VERSION}), libc6")
  set(CPACK_COMPONENT_CUDA_DESCRIPTION
    "tenet: the CUDA back end, a plugin libtenet.so loads on first use
 It needs NVIDIA's CUDA runtime and cuBLAS (libcudart.so.13,
 libcublas.so.13) on the loader's path; without them tenet reports CUDA
 as unavailable and runs on the CPU.")
endif()
if(TENET_HAVE_MPI)
  list(APPEND CPACK_COMPONENTS_ALL mpi)
  set(CPACK_DEBIAN_MPI_PACKAGE_NAME libtenet-mpi${PROJECT_VERSION_MAJOR})
  set(CPACK_DEBIAN_MPI_PACKAGE_SHLIBDEPS ON)
  set(CPACK_DEBIAN_MPI_PACKAGE_DEPENDS "libtenet${PROJECT_VERSION_MAJOR} (= ${TENET_DEB_VERSION})")
  set(CPACK_DEBIAN_MPI_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/cmake/deb/triggers)
  set(CPACK_COMPONENT_MPI_DESCRIPTION
    "tenet: collectives and data-parallel training over MPI
 Allreduce, broadcast and DDP-style gradient averaging (tenet/dist.h).")
  string(APPEND TENET_DEV_DEPENDS ", libtenet-mpi${PROJECT_VERSION_MAJOR} (= ${TENET_DEB_VERSION}), libopenmpi-dev")
endif()
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "${TENET_DEV_DEPENDS}")

include(CPack)

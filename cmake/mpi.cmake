# tenet_mpi (include/tenet/dist.h, dist/): collectives and DDP over MPI, a library of its own
# so that tenet never depends on MPI. TENET_MPI=AUTO builds it when MPI is found.
set(TENET_HAVE_MPI OFF)
if(NOT TENET_MPI STREQUAL "OFF")
  if(TENET_MPI STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS C)
  else()
    find_package(MPI QUIET COMPONENTS C)
  endif()
  if(MPI_C_FOUND)
    set(TENET_HAVE_MPI ON)
  endif()
endif()
message(STATUS "tenet_mpi (TENET_MPI=${TENET_MPI}): ${TENET_HAVE_MPI}")

# mpirun for the tests and benches: as root in CI containers, more ranks than cores, and no
# single-copy mechanism that needs ptrace rights a container may not grant.
set(TENET_MPIEXEC ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe
  --mca btl_vader_single_copy_mechanism none)
# Environment of the MPI tests under ASan: they run LeakSanitizer before MPI_Finalize
# (tests/dist/lsan.supp names what Open MPI keeps; its frames need the slow unwinder).
set(lsan_mpi "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:fast_unwind_on_malloc=0"
  "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/dist/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0")

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

# mpirun for the tests and benches: as root in CI containers, more ranks than cores (ranks that
# wait yield the core instead of spinning), and no single-copy mechanism that needs ptrace rights
# a container may not grant. The MPI tests run alone (RUN_SERIAL): ranks of two jobs spinning
# against each other on two cores can take minutes.
set(TENET_MPIEXEC ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe
  --mca btl_vader_single_copy_mechanism none --mca mpi_yield_when_idle 1)
# Under ASan the MPI tests unwind malloc's callers with the slow unwinder (below), which calls
# _Unwind_Backtrace: tenet links libunwind, whose _Unwind_Backtrace takes its own lock inside
# dl_iterate_phdr's and deadlocks against Open MPI's threads starting up. The ranks preload the
# ASan runtime and libgcc_s, whose unwinder does not.
if(TENET_HAVE_MPI AND TENET_SANITIZE STREQUAL "address")
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE _tn_asan OUTPUT_STRIP_TRAILING_WHITESPACE)
  get_filename_component(_tn_asan "${_tn_asan}" REALPATH)
  list(APPEND TENET_MPIEXEC -x "LD_PRELOAD=${_tn_asan}:libgcc_s.so.1")
endif()

# Environment of the MPI tests under ASan: they run LeakSanitizer before MPI_Finalize
# (tests/dist/lsan.supp names what Open MPI keeps; its frames need the slow unwinder).
set(lsan_mpi "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:fast_unwind_on_malloc=0"
  "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/dist/lsan.supp:print_suppressions=0:fast_unwind_on_malloc=0")

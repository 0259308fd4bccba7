# Sourced by scripts/asan.sh and scripts/fuzz.sh: the one configuration of
# the clang-14 ASan + UBSan build dir both use, and the sanitizer options
# every program run from it (tests, the servers they start, fuzz targets)
# inherits. Debug information is line tables only: enough for every frame
# of a sanitizer report to name its file and line, and far less for the
# compiler and linker to write than full -g (the build is most of the job).
asan_configure() {
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG" \
    -DCMAKE_CXX_COMPILER=clang++-14 -DENCODER_FUZZ=ON \
    -DENCODER_BUILD_TESTS=ON ${ASAN_CMAKE_ARGS:-}
}
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_init_order=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"

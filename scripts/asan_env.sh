# Sourced by scripts/asan.sh and scripts/fuzz.sh: the one configuration of
# the clang-14 ASan + UBSan build dir both use, and the sanitizer options
# every program run from it (tests, the servers they start, fuzz targets)
# inherits. LibTorch is the pinned wheel's (scripts/libtorch.sh), as
# shipped: only our code is instrumented. Debug information is line tables
# only: enough for every frame of a sanitizer report to name its file and
# line, and far less for the compiler and linker to write than full -g (the
# build is most of the job).
# No optimization but in the hot code (ENCODER_HOT_CXX_FLAGS: tokenizers,
# int8 layer): clang spends most of an instrumented build optimizing
# (http_session.cc: 56 s at -O2 or -O1, 25 s at -O0), while most tests
# spend their time in LibTorch, gRPC and the Python drivers.
asan_configure() {
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -gline-tables-only -DNDEBUG" \
    -DENCODER_HOT_CXX_FLAGS=-O2 \
    -DCMAKE_CXX_COMPILER=clang++-14 -DENCODER_FUZZ=ON \
    -DENCODER_BUILD_TESTS=ON \
    -DENCODER_TORCH_WHEEL="$(bash scripts/libtorch.sh)" ${ASAN_CMAKE_ARGS:-}
}
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_init_order=1:check_initialization_order=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp:print_suppressions=0"

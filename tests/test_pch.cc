// The one source of encoder_test_pch (tests/CMakeLists.txt), the target that
// builds the precompiled header the LibTorch tests reuse. Nothing else.

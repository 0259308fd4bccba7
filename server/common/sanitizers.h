// ENCODER_ASAN is defined when this translation unit is built with
// AddressSanitizer (GCC defines __SANITIZE_ADDRESS__, clang answers
// __has_feature). Its allocator then replaces glibc's and LibTorch's
// defaults, so allocator tuning is switched off.
#ifndef ENCODER_SERVER_COMMON_SANITIZERS_H_
#define ENCODER_SERVER_COMMON_SANITIZERS_H_

#if defined(__SANITIZE_ADDRESS__)
#define ENCODER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ENCODER_ASAN 1
#endif
#endif

#endif  // ENCODER_SERVER_COMMON_SANITIZERS_H_

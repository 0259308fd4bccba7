#include "server/model/cpu_features.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define ENCODER_X86 1
#endif

namespace encoder::model {
namespace {

#ifdef ENCODER_X86
bool Bit(uint32_t reg, int bit) { return ((reg >> bit) & 1u) != 0; }

// XCR0: which register states the OS saves (and so lets programs use).
uint64_t ReadXcr0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

std::string BrandString() {
  uint32_t regs[12] = {};
  if (__get_cpuid_max(0x80000000u, nullptr) < 0x80000004u) return "unknown";
  for (uint32_t i = 0; i < 3; ++i) {
    __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1],
                &regs[4 * i + 2], &regs[4 * i + 3]);
  }
  char text[sizeof(regs) + 1] = {};
  std::memcpy(text, regs, sizeof(regs));
  std::string brand(text);
  return std::string(absl::StripAsciiWhitespace(brand));
}

std::string Vendor() {
  uint32_t max = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &max, &b, &c, &d)) return "unknown";
  char text[13] = {};
  std::memcpy(text, &b, 4);
  std::memcpy(text + 4, &d, 4);
  std::memcpy(text + 8, &c, 4);
  return std::string(text);
}

CpuFeatures Detect() {
  CpuFeatures f;
  f.model = BrandString();
  f.vendor = Vendor();
  uint32_t a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = Bit(c, 27);
  const uint64_t xcr0 = osxsave ? ReadXcr0() : 0;
  const bool ymm = (xcr0 & 0x6) == 0x6;    // SSE + AVX state
  const bool zmm = (xcr0 & 0xe6) == 0xe6;  // + opmask, ZMM_Hi256, Hi16_ZMM
  const bool tiles = (xcr0 & 0x60000) == 0x60000;  // XTILECFG + XTILEDATA
  f.fma = ymm && Bit(c, 12);
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = ymm && Bit(b, 5);
  f.avx512f = zmm && Bit(b, 16);
  f.avx512_vnni = f.avx512f && Bit(c, 11);
  f.amx_bf16 = tiles && Bit(d, 22);
  f.amx_int8 = tiles && Bit(d, 25);
  uint32_t a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  __cpuid_count(7, 1, a1, b1, c1, d1);
  f.avx512_bf16 = f.avx512f && Bit(a1, 5);
  return f;
}
#else
CpuFeatures Detect() {
  CpuFeatures f;
  f.model = "unknown";
  f.vendor = "unknown";
  return f;
}
#endif

}  // namespace

std::vector<std::string> CpuFeatures::Names() const {
  std::vector<std::string> names;
  const std::pair<bool, const char*> all[] = {{avx2, "avx2"},
                                              {fma, "fma"},
                                              {avx512f, "avx512f"},
                                              {avx512_vnni, "avx512_vnni"},
                                              {avx512_bf16, "avx512_bf16"},
                                              {amx_bf16, "amx_bf16"},
                                              {amx_int8, "amx_int8"}};
  for (const auto& [present, name] : all) {
    if (present) names.push_back(name);
  }
  return names;
}

std::string CpuFeatures::Joined() const {
  const std::vector<std::string> names = Names();
  return names.empty() ? "none" : absl::StrJoin(names, ",");
}

const CpuFeatures& DetectCpuFeatures() {
  static const CpuFeatures* const features = new CpuFeatures(Detect());
  return *features;
}

}  // namespace encoder::model

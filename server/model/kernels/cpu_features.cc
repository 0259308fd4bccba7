#include "server/model/kernels/cpu_features.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
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

// oneDNN's ISA names, each with its rank: a feature needs a rank of at
// least that of the level it belongs to (ApplyRank).
int IsaRank(const std::string& level) {
  static const std::pair<const char*, int> kLevels[] = {
      {"sse41", 0},
      {"avx", 1},
      {"avx2", 2},
      {"avx2_vnni", 2},
      {"avx2_vnni_2", 2},
      {"avx512_core", 3},
      {"avx512_core_vnni", 4},
      {"avx512_core_bf16", 5},
      {"avx512_core_fp16", 5},
      {"avx512_core_amx", 6},
      {"avx512_core_amx_fp16", 6},
      {"default", 7},
      {"all", 7}};
  const std::string lower = absl::AsciiStrToLower(level);
  for (const auto& [name, rank] : kLevels) {
    if (lower == name) return rank;
  }
  return -1;
}

void ApplyRank(int rank, CpuFeatures* f) {
  if (rank < 2) f->avx2 = f->fma = false;
  if (rank < 3) f->avx512f = false;
  if (rank < 4) f->avx512_vnni = false;
  if (rank < 5) f->avx512_bf16 = false;
  if (rank < 6) f->amx_bf16 = f->amx_int8 = false;
}

std::string Variable(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

CpuFeatures DetectCapped() {
  CpuFeatures f = Detect();
  int best = 7;
  for (const char* name :
       {"ENCODER_CPU_ISA", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const std::string value = Variable(name);
    const int rank = value.empty() ? -1 : IsaRank(value);
    if (rank < 0 || rank >= best) continue;
    best = rank;
    ApplyRank(rank, &f);
    f.isa_cap = absl::StrCat(absl::AsciiStrToUpper(value), " (", name, ")");
  }
  return f;
}

}  // namespace

bool CapIsa(const std::string& level, CpuFeatures* f) {
  const int rank = IsaRank(level);
  if (rank < 0) return false;
  ApplyRank(rank, f);
  return true;
}

std::string CpuIsaCapError() {
  const std::string value = Variable("ENCODER_CPU_ISA");
  if (value.empty() || IsaRank(value) >= 0) return "";
  return absl::StrCat(
      "ENCODER_CPU_ISA=", value,
      " is not an ISA level; one of SSE41, AVX, AVX2, AVX2_VNNI, "
      "AVX2_VNNI_2, AVX512_CORE, AVX512_CORE_VNNI, AVX512_CORE_BF16, "
      "AVX512_CORE_FP16, AVX512_CORE_AMX, AVX512_CORE_AMX_FP16, DEFAULT, ALL");
}

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
  static const CpuFeatures* const features = new CpuFeatures(DetectCapped());
  return *features;
}

}  // namespace encoder::model

#include "server/model/kernels/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

namespace encoder::model {
namespace {

// The value of the first /proc/cpuinfo line named `key` ("" if none).
std::string KernelField(const std::string& key) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon + 2 > line.size()) return "";
    return line.substr(colon + 2);
  }
  return "";
}

// The kernel's own reading of cpuid: the "flags" line of /proc/cpuinfo.
std::set<std::string> KernelFlags() {
  std::istringstream words(KernelField("flags"));
  std::set<std::string> flags;
  for (std::string w; words >> w;) flags.insert(w);
  return flags;
}

// The kernel's flags, lowered by the ISA caps in this process's
// environment exactly as DetectCpuFeatures lowers its own reading: the
// ISA-emulation runs of the suite (tests/model/isa_run.sh) set them.
TEST(CpuFeatures, AgreeWithTheKernelsFlags) {
  const std::set<std::string> flags = KernelFlags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags on this system";
  CpuFeatures want;
  want.avx2 = flags.count("avx2") == 1;
  want.fma = flags.count("fma") == 1;
  want.avx512f = flags.count("avx512f") == 1;
  want.avx512_vnni = flags.count("avx512_vnni") == 1;
  want.avx512_bf16 = flags.count("avx512_bf16") == 1;
  want.amx_bf16 = flags.count("amx_bf16") == 1;
  want.amx_int8 = flags.count("amx_int8") == 1;
  bool capped = false;
  for (const char* name :
       {"ENCODER_CPU_ISA", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0' && CapIsa(value, &want)) {
      capped = true;
    }
  }
  const CpuFeatures& f = DetectCpuFeatures();
  EXPECT_EQ(f.avx2, want.avx2);
  EXPECT_EQ(f.fma, want.fma);
  EXPECT_EQ(f.avx512f, want.avx512f);
  EXPECT_EQ(f.avx512_vnni, want.avx512_vnni);
  EXPECT_EQ(f.avx512_bf16, want.avx512_bf16);
  EXPECT_EQ(f.amx_bf16, want.amx_bf16);
  EXPECT_EQ(f.amx_int8, want.amx_int8);
  EXPECT_EQ(f.isa_cap.empty(), !capped) << f.isa_cap;
  for (const std::string& name : f.Names()) {
    EXPECT_EQ(flags.count(name), 1u) << name;
  }
  std::cout << "features: " << f.Joined()
            << (f.isa_cap.empty() ? "" : ", capped at " + f.isa_cap) << "\n";
}

// Each level keeps the features at or below it and drops the rest; the
// names are oneDNN's, in any case; an unknown name changes nothing.
TEST(CpuFeatures, CapIsaLowersToEachLevel) {
  CpuFeatures all;
  all.avx2 = all.fma = all.avx512f = all.avx512_vnni = all.avx512_bf16 =
      all.amx_bf16 = all.amx_int8 = true;
  const std::string every = all.Joined();
  const std::pair<const char*, std::string> levels[] = {
      {"SSE41", "none"},
      {"AVX", "none"},
      {"AVX2", "avx2,fma"},
      {"avx2_vnni", "avx2,fma"},
      {"AVX512_CORE", "avx2,fma,avx512f"},
      {"AVX512_CORE_VNNI", "avx2,fma,avx512f,avx512_vnni"},
      {"AVX512_CORE_BF16", "avx2,fma,avx512f,avx512_vnni,avx512_bf16"},
      {"AVX512_CORE_FP16", "avx2,fma,avx512f,avx512_vnni,avx512_bf16"},
      {"AVX512_CORE_AMX", every},
      {"ALL", every},
      {"default", every}};
  for (const auto& [level, joined] : levels) {
    CpuFeatures f = all;
    EXPECT_TRUE(CapIsa(level, &f)) << level;
    EXPECT_EQ(f.Joined(), joined) << level;
  }
  // A cap never adds what the CPU lacks.
  CpuFeatures avx2_only;
  avx2_only.avx2 = avx2_only.fma = true;
  EXPECT_TRUE(CapIsa("AVX512_CORE_AMX", &avx2_only));
  EXPECT_EQ(avx2_only.Joined(), "avx2,fma");
  CpuFeatures unchanged = all;
  EXPECT_FALSE(CapIsa("AVX3", &unchanged));
  EXPECT_FALSE(CapIsa("", &unchanged));
  EXPECT_EQ(unchanged.Joined(), all.Joined());
}

// Packing every float32 product wins wherever oneDNN runs AVX-512, whoever
// made the CPU (measured on a Zen 4 EPYC and a Xeon with AMX), and is not
// assumed below it (an AVX2 EPYC: the BLAS won above 256 rows), including
// on a stronger CPU capped to AVX2.
TEST(CpuFeatures, PackedFloat32WinsFollowsAvx512NotTheVendor) {
  for (const char* vendor : {"AuthenticAMD", "GenuineIntel", "HygonGenuine"}) {
    CpuFeatures avx512;
    avx512.vendor = vendor;
    avx512.avx2 = avx512.fma = avx512.avx512f = true;
    EXPECT_TRUE(avx512.packed_float32_wins()) << vendor;
    CpuFeatures capped = avx512;
    capped.amx_bf16 = capped.amx_int8 = true;
    ASSERT_TRUE(CapIsa("AVX2", &capped));
    EXPECT_FALSE(capped.packed_float32_wins()) << vendor;
    CpuFeatures avx2_only;
    avx2_only.vendor = vendor;
    avx2_only.avx2 = avx2_only.fma = true;
    EXPECT_FALSE(avx2_only.packed_float32_wins()) << vendor;
  }
}

// The model is CPUID's brand string, read now. The kernel's "model name" is
// the same string read once at boot: they differ only on a virtual machine
// resumed on another host, where CPUID tells the processor it runs on now
// (seen: a kernel saying "AMD EPYC" under a CPUID brand naming the new
// host's processor). So the kernel's name is a check when it agrees with
// the vendor, not an oracle.
TEST(CpuFeatures, ModelIsTheBrandString) {
  const std::string model = DetectCpuFeatures().model;
  ASSERT_FALSE(model.empty());
  EXPECT_NE(model.front(), ' ');
  EXPECT_NE(model.back(), ' ');
  for (char c : model) {
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "byte " << int(c) << " in " << model;
  }
  const std::string kernel_model = KernelField("model name");
  if (kernel_model.empty()) return;
  if (model != kernel_model) {
    std::cout << "note: CPUID brand \"" << model << "\", kernel (at boot) \""
              << kernel_model << "\"\n";
  }
}

// The vendor is CPUID's leaf 0, which the kernel prints as "vendor_id".
TEST(CpuFeatures, VendorIsTheKernelsVendorId) {
  const std::string kernel_vendor = KernelField("vendor_id");
  if (kernel_vendor.empty()) GTEST_SKIP() << "no vendor_id in /proc/cpuinfo";
  const CpuFeatures& f = DetectCpuFeatures();
  EXPECT_EQ(f.vendor, kernel_vendor);
}

TEST(CpuFeatures, JoinedListsNamesOrNone) {
  CpuFeatures none;
  EXPECT_EQ(none.Joined(), "none");
  CpuFeatures some;
  some.avx2 = true;
  some.avx512_bf16 = true;
  EXPECT_EQ(some.Joined(), "avx2,avx512_bf16");
  EXPECT_TRUE(some.native_bf16());
  EXPECT_FALSE(some.native_int8());
}

}  // namespace
}  // namespace encoder::model

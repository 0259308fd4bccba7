#include "server/model/cpu_features.h"

#include <gtest/gtest.h>

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

TEST(CpuFeatures, AgreeWithTheKernelsFlags) {
  const std::set<std::string> flags = KernelFlags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags on this system";
  const CpuFeatures& f = DetectCpuFeatures();
  EXPECT_EQ(f.avx2, flags.count("avx2") == 1);
  EXPECT_EQ(f.fma, flags.count("fma") == 1);
  EXPECT_EQ(f.avx512f, flags.count("avx512f") == 1);
  EXPECT_EQ(f.avx512_vnni, flags.count("avx512_vnni") == 1);
  EXPECT_EQ(f.avx512_bf16, flags.count("avx512_bf16") == 1);
  EXPECT_EQ(f.amx_bf16, flags.count("amx_bf16") == 1);
  EXPECT_EQ(f.amx_int8, flags.count("amx_int8") == 1);
  for (const std::string& name : f.Names()) {
    EXPECT_EQ(flags.count(name), 1u) << name;
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

// The kernel trace: parsing the libraries' verbose lines (oneDNN 3.x and
// MKL, lines as the libraries print them), the server's own output passing
// through a trace untouched, and, on the CPU at hand, that an int8 product
// of many rows runs on AMX tiles exactly where the detected (and possibly
// capped, tests/isa) features include amx_int8, and a bfloat16 product on
// oneDNN wherever the CPU has native bfloat16.
#include "server/model/kernels/kernel_trace.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "server/model/kernels/cpu_features.h"
#include "server/model/kernels/int8_linear.h"

namespace encoder::model {
namespace {

// tests/isa/isa_run.sh sets ONEDNN_VERBOSE=profile_create to read oneDNN's
// ISA; a trace leaves a user's setting alone, and that mode prints no
// executions. Cleared before oneDNN first reads it (at its first use, after
// static initialization); the trace's own ISA line is checked instead.
const bool kVerboseCleared = [] {
  unsetenv("ONEDNN_VERBOSE");
  return true;
}();

TEST(KernelTrace, ParsesOneDnnExecAndIsaLines) {
  KernelTrace t;
  ParseTraceLine(
      "onednn_verbose,v1,info,cpu,isa:Intel AVX10.1 and Intel AMX with "
      "bfloat16 and 8-bit integer support\n",
      &t);
  EXPECT_EQ(t.onednn_isa,
            "Intel AVX10.1 and Intel AMX with bfloat16 and 8-bit integer "
            "support");
  ParseTraceLine(
      "onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx10_1_512_"
      "amx,undef,src:u8:a:blocked:ab::f0 wei:s8:p:blocked:BA16a64b4a::f8:"
      "zpm2 dst:f32:a:blocked:ab::f0,,,256x40:40x136,0.0139",
      &t);
  ParseTraceLine(
      "onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx10_1_512_"
      "amx,undef,src:u8:a:blocked:ab::f0 wei:s8:p:blocked:BA16a64b4a::f8:"
      "zpm2 dst:f32:a:blocked:ab::f0,,,7x40:40x136,0.01",
      &t);
  ParseTraceLine(
      "onednn_verbose,v1,primitive,exec,cpu,reorder,jit:uni,undef,src:f32::"
      "blocked:ab::f0 dst:s8::blocked:BA16a64b4a::f0,,,40x136,0.01",
      &t);
  ParseTraceLine(
      "onednn_verbose,v1,primitive,exec,cpu,inner_product,brgemm:avx512_"
      "core_bf16,forward_training,src:bf16::blocked:ab::f0 wei:bf16:a:"
      "blocked:AB16b64a2b::f0 bia:bf16::blocked:a::f0 dst:bf16::blocked:ab::"
      "f0,attr-scratchpad:user,,mb32ic384oc384,0.04",
      &t);
  ParseTraceLine(
      "onednn_verbose,v1,ukernel,exec,cpu,brgemm,,undef,src:bf16::blocked:"
      "ab::f0 wei:bf16::blocked:ab::f0 dst:f32::blocked:ab::f0,,bs:1 beta:0,"
      "32x64:64x128,0.0270996",
      &t);
  ASSERT_EQ(t.kernels.size(), 3u);  // the reorder is not a product
  EXPECT_EQ(t.kernels[2].ToString(),
            "onednn brgemm ukernel bf16:bf16->f32 rows 32 (1 call)");
  const KernelUse& mm = t.kernels[0];
  EXPECT_EQ(mm.library, "onednn");
  EXPECT_EQ(mm.primitive, "matmul");
  EXPECT_EQ(mm.impl, "brg_matmul:avx10_1_512_amx");
  EXPECT_EQ(mm.types, "u8:s8->f32");
  EXPECT_EQ(mm.min_rows, 7);
  EXPECT_EQ(mm.max_rows, 256);
  EXPECT_EQ(mm.calls, 2);
  EXPECT_EQ(mm.ToString(),
            "onednn matmul brg_matmul:avx10_1_512_amx u8:s8->f32 rows 7-256 "
            "(2 calls)");
  const KernelUse& ip = t.kernels[1];
  EXPECT_EQ(ip.primitive, "inner_product");
  EXPECT_EQ(ip.types, "bf16:bf16->bf16");
  EXPECT_EQ(ip.min_rows, 32);
  EXPECT_EQ(ip.ToString(),
            "onednn inner_product brgemm:avx512_core_bf16 bf16:bf16->bf16 "
            "rows 32 (1 call)");
}

TEST(KernelTrace, ParsesMklHeaderAndCalls) {
  KernelTrace t;
  ParseTraceLine(
      "MKL_VERBOSE oneMKL 2024.0 Update 2 Product build 20240605 for "
      "Intel(R) 64 architecture Intel(R) Advanced Vector Extensions 2 "
      "(Intel(R) AVX2) enabled processors, Lnx 2.60GHz lp64 gnu_thread",
      &t);
  EXPECT_EQ(t.mkl_isa,
            "Intel(R) Advanced Vector Extensions 2 (Intel(R) AVX2) enabled "
            "processors");
  ParseTraceLine(
      "MKL_VERBOSE SGEMM(T,N,384,32,384,0x7ffd6e98dc30,0x11061d00,384,"
      "0x11055c80,384,0x7ffd6e98dc50,0x110f1d80,384) 379.67us CNR:OFF Dyn:1 "
      "FastMM:1 TID:0  NThr:1",
      &t);
  ParseTraceLine("some other line (SGEMM)", &t);
  ASSERT_EQ(t.kernels.size(), 1u);
  EXPECT_EQ(t.kernels[0].ToString(), "mkl SGEMM (1 call)");
}

TEST(KernelTrace, OtherOutputPassesThroughAndWorkStatusReturns) {
  testing::internal::CaptureStdout();
  absl::Status status;
  KernelTrace t = TraceKernels(
      [] {
        std::printf("a log line\n");
        std::fflush(stdout);
        at::Tensor a = at::randn({16, 32});
        at::mm(a, at::randn({32, 8}));
        std::printf("another\n");
        return absl::InvalidArgumentError("the work's own error");
      },
      &status);
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(out, "a log line\nanother\n");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "the work's own error");
  // The float32 product ran in one of the two libraries.
  EXPECT_FALSE(t.kernels.empty());
}

TEST(KernelTrace, Int8ProductRunsOnAmxExactlyWhereTheCpuHasIt) {
  const CpuFeatures& cpu = DetectCpuFeatures();
  if (!cpu.native_int8()) {
    GTEST_SKIP() << "the direct int8 product needs VNNI or AMX";
  }
  at::manual_seed(1);
  auto q = Int8Linear::Create(at::randn({128, 256}), at::randn({128}));
  ASSERT_TRUE(q.ok()) << q.status();
  if (!q->direct()) GTEST_SKIP() << "LibTorch without the direct product";
  absl::Status status;
  KernelTrace t = TraceKernels(
      [&] {
        q->Forward(at::randn({64, 256}));
        return absl::OkStatus();
      },
      &status);
  ASSERT_TRUE(status.ok());
  bool int8_product = false, amx = false;
  for (const KernelUse& k : t.kernels) {
    if (k.library != "onednn" || k.types.rfind("u8:s8", 0) != 0) continue;
    int8_product = true;
    amx = amx || k.impl.find("amx") != std::string::npos;
  }
  ASSERT_TRUE(int8_product) << "no oneDNN int8 product in the trace";
  EXPECT_EQ(t.onednn_isa.find("AMX") != std::string::npos, cpu.amx_int8)
      << t.onednn_isa;
  EXPECT_EQ(amx, cpu.amx_int8) << "oneDNN ISA: " << t.onednn_isa
                               << "; detected amx_int8 " << cpu.amx_int8;
}

TEST(KernelTrace, Bf16ProductRunsOnOneDnnWithNativeBf16) {
  const CpuFeatures& cpu = DetectCpuFeatures();
  if (!cpu.native_bf16()) GTEST_SKIP() << "no native bfloat16";
  absl::Status status;
  KernelTrace t = TraceKernels(
      [] {
        at::linear(at::randn({32, 256}).to(at::kBFloat16),
                   at::randn({128, 256}).to(at::kBFloat16));
        return absl::OkStatus();
      },
      &status);
  bool bf16 = false, amx = false;
  for (const KernelUse& k : t.kernels) {
    if (k.library == "onednn" && k.types.rfind("bf16", 0) == 0) {
      bf16 = true;
      amx = amx || k.impl.find("amx") != std::string::npos;
    }
  }
  EXPECT_TRUE(bf16) << "no oneDNN bfloat16 product in the trace";
  EXPECT_EQ(amx, cpu.amx_bf16);
}

}  // namespace
}  // namespace encoder::model

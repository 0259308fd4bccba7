// Which library kernels a piece of CPU work ran: oneDNN's and MKL's own
// verbose traces, switched on around the work and read back from standard
// output. The server traces each model's warm-up so /info and ListModels
// say what its products run on this CPU (an int8 product on AMX tiles or
// on AVX-512 VNNI, float32 on MKL's AVX-512 or AVX2 code), as measured
// rather than assumed from the CPU's flags.
#ifndef ENCODER_SERVER_MODEL_KERNELS_KERNEL_TRACE_H_
#define ENCODER_SERVER_MODEL_KERNELS_KERNEL_TRACE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace encoder::model {

// One kind of kernel the work ran, with the range of rows it ran on.
struct KernelUse {
  std::string library;    // "onednn" or "mkl"
  std::string primitive;  // oneDNN's kind ("matmul", "inner_product"),
                          // or MKL's function ("SGEMM")
  std::string impl;       // oneDNN's implementation, e.g.
                          // "brg_matmul:avx512_core_amx"; "" for MKL
  std::string types;      // "u8:s8->f32", "bf16:bf16->bf16"; "" for MKL
  int64_t min_rows = 0;   // the product's rows (M), smallest and largest
  int64_t max_rows = 0;   // seen; 0 when the trace does not say
  int64_t calls = 0;

  // "onednn matmul brg_matmul:avx512_core_amx u8:s8->f32 rows 7-256
  // (12 calls)".
  std::string ToString() const;
};

struct KernelTrace {
  // The instruction sets the libraries report dispatching to, as they
  // word them ("" when the library printed no header during the work).
  std::string onednn_isa;
  std::string mkl_isa;
  std::vector<KernelUse> kernels;  // the products only (reorders left out)
};

// Runs `work` with both libraries' verbose traces on and returns what it
// ran. Standard output is diverted to a file meanwhile; every line that is
// not a trace line (the server's own log) is written back to standard
// output afterwards, in order. Traces serialize on a process-wide mutex.
// Where ONEDNN_VERBOSE or MKL_VERBOSE is already set in the environment,
// the trace lines are written back too and the levels are left as set.
// `work`'s status is returned through `*work_status`.
KernelTrace TraceKernels(const std::function<absl::Status()>& work,
                         absl::Status* work_status);

// Parses trace lines (exposed for tests): each line is one of oneDNN's
// "onednn_verbose,..." or MKL's "MKL_VERBOSE ..." lines; others are
// ignored. Adds to *trace.
void ParseTraceLine(absl::string_view line, KernelTrace* trace);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_KERNELS_KERNEL_TRACE_H_

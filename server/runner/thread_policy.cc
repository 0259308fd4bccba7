#include "server/runner/thread_policy.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace encoder::runner {

std::string ApplyThreadPolicy(int intra_op_threads, int blas_threads) {
  at::set_num_threads(intra_op_threads);
  std::string out = absl::StrCat(at::get_num_threads(), " intra-op threads");
  // Looked up at run time: the BLAS behind LibTorch is chosen by the
  // system (Debian's alternatives), not by this build.
  using SetThreads = void (*)(int);
  using GetThreads = int (*)();
  auto set = reinterpret_cast<SetThreads>(
      dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  auto get = reinterpret_cast<GetThreads>(
      dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (set == nullptr || get == nullptr) {
    return absl::StrCat(out, ", BLAS pool not OpenBLAS (left as is)");
  }
  if (blas_threads > 0) set(blas_threads);
  return absl::StrCat(out, ", OpenBLAS ", get(), " threads");
}

}  // namespace encoder::runner

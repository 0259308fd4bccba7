// The compute threads of the process: LibTorch's intra-op pool and the BLAS
// library's own pool (OpenBLAS keeps one per process, sized to every core
// unless told, which makes each matrix product of a one-thread server run
// on all cores and busy-wait there between products).
#ifndef ENCODER_SERVER_RUNNER_THREAD_POLICY_H_
#define ENCODER_SERVER_RUNNER_THREAD_POLICY_H_

#include <string>

namespace encoder::runner {

// Sets LibTorch's pool to `intra_op_threads` and, when `blas_threads` > 0,
// OpenBLAS's pool to `blas_threads` (0 leaves it as OpenBLAS chose);
// returns what is in effect, for the log ("1 intra-op threads, OpenBLAS 2
// threads" or "..., BLAS pool not OpenBLAS").
std::string ApplyThreadPolicy(int intra_op_threads, int blas_threads);

}  // namespace encoder::runner

#endif  // ENCODER_SERVER_RUNNER_THREAD_POLICY_H_

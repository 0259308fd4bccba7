// The compute threads of the process: LibTorch's intra-op pool and the BLAS
// library's own pool (OpenBLAS keeps one per process, sized to every core
// unless told, which makes each matrix product of a one-thread server run
// on all cores and busy-wait there between products).
#ifndef ENCODER_SERVER_RUNNER_THREAD_POLICY_H_
#define ENCODER_SERVER_RUNNER_THREAD_POLICY_H_

#include <string>

namespace encoder::runner {

// Sets both pools to `threads`; returns what was set, for the log
// ("2 intra-op threads, OpenBLAS 2 threads" or "..., BLAS pool not
// OpenBLAS").
std::string ApplyThreadPolicy(int threads);

}  // namespace encoder::runner

#endif  // ENCODER_SERVER_RUNNER_THREAD_POLICY_H_

#include "server/app/drain.h"

#include <algorithm>

namespace encoder::app {

void Serve(const DrainTargets& targets) {
  targets.core->SetHost(targets.host);
  if (targets.grpc != nullptr) targets.grpc->SetServing(true);
}

bool Drain(const DrainTargets& targets, absl::Duration grace,
           absl::Duration unready) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + grace;
  if (targets.grpc != nullptr) targets.grpc->SetServing(false);
  targets.core->StartDraining();
  const bool drained =
      targets.host == nullptr || targets.host->DrainAll(deadline);
  // Keep answering UNAVAILABLE (and health NOT_SERVING) for a while before
  // the transport closes: calls that reach a closing transport fail with
  // CANCELLED, which load balancers and clients do not retry, while
  // UNAVAILABLE is retried and tells health-checking balancers to move on.
  absl::SleepFor(std::min(start + unready, deadline) - absl::Now());
  // Accepted calls have their results; give the transport the rest of the
  // grace period to send them, then cancel whatever remains.
  if (targets.grpc != nullptr) targets.grpc->Shutdown(deadline);
  return drained;
}

}  // namespace encoder::app

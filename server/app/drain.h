// The hand-off once the models are loaded (the core gets them, health
// SERVING), and the drain sequence of a process, every front together:
// health NOT_SERVING and readiness 503 (the core draining), new calls
// UNAVAILABLE, accepted work finished, then the gRPC transport closed.
#ifndef ENCODER_SERVER_APP_DRAIN_H_
#define ENCODER_SERVER_APP_DRAIN_H_

#include "absl/time/time.h"
#include "server/api/served_model.h"
#include "server/core/inference.h"
#include "server/service/server.h"

namespace encoder::app {

struct DrainTargets {
  core::Inference* core = nullptr;         // not null
  api::ModelCatalog* host = nullptr;       // null: no models were loaded
  service::EncoderServer* grpc = nullptr;  // null: no gRPC front
};

// The loaded models to the core (readiness 200 on HTTP), then gRPC health
// SERVING. `host` must not be null.
void Serve(const DrainTargets& targets);

// Health NOT_SERVING, new calls UNAVAILABLE on every front, accepted work
// waited for up to `grace` and, counted from the start, for at least
// `unready` (bounded by `grace`), then the gRPC transport shut down (calls
// still running at the deadline are cancelled). The HTTP front answers 503
// from the start and is stopped by its owner afterwards. Returns whether
// every accepted call completed in time.
bool Drain(const DrainTargets& targets, absl::Duration grace,
           absl::Duration unready = absl::ZeroDuration());

}  // namespace encoder::app

#endif  // ENCODER_SERVER_APP_DRAIN_H_

// Propagation of absl::Status and absl::StatusOr<T> without the hand-written
// `if (!x.ok()) return x.status();` at every call.
//
//   RETURN_IF_ERROR(expr);         // expr: absl::Status; returns it if not OK
//   ASSIGN_OR_RETURN(lhs, expr);   // expr: absl::StatusOr<T>; returns its
//                                  // status if not OK, else lhs = *moved value
//
// `lhs` may declare a variable (`ASSIGN_OR_RETURN(auto x, F())`) or name an
// existing one (`ASSIGN_OR_RETURN(x, F())`). The enclosing function must
// return absl::Status or absl::StatusOr<U> (both construct from a Status).
// Plain C++ and Abseil only: usable in every layer.
#ifndef ENCODER_SERVER_COMMON_STATUS_MACROS_H_
#define ENCODER_SERVER_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ENCODER_STATUS_CONCAT_INNER_(a, b) a##b
#define ENCODER_STATUS_CONCAT_(a, b) ENCODER_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    if (::absl::Status encoder_status_ = (expr);     \
        ABSL_PREDICT_FALSE(!encoder_status_.ok())) { \
      return encoder_status_;                        \
    }                                                \
  } while (false)

#define ASSIGN_OR_RETURN(lhs, expr) \
  ENCODER_ASSIGN_OR_RETURN_IMPL_(   \
      ENCODER_STATUS_CONCAT_(encoder_statusor_, __LINE__), lhs, expr)

#define ENCODER_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (ABSL_PREDICT_FALSE(!statusor.ok())) {                 \
    return std::move(statusor).status();                    \
  }                                                         \
  lhs = *std::move(statusor)

#endif  // ENCODER_SERVER_COMMON_STATUS_MACROS_H_

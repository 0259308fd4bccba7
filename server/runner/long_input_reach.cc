#include "server/runner/long_input_reach.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/time/clock.h"
#include "server/common/status_macros.h"

namespace encoder::runner {
namespace {

// Multiples of the reference length the grid tries, before the limit.
constexpr double kMultiples[] = {1.25, 1.5, 2,  3,  4,  6, 8,
                                 12,   16,  24, 32, 48, 64};

// The repeated period's length for a model of `max_length` tokens.
int64_t PeriodLength(int64_t max_length) {
  return std::max<int64_t>(1, max_length / 4);
}

std::vector<int64_t> Period(int64_t n, int64_t vocab) {
  std::mt19937_64 rng(kReachSourceSeed);
  // Ids from 1: id 0 is many vocabularies' padding.
  std::uniform_int_distribution<int64_t> id(std::min<int64_t>(1, vocab - 1),
                                            vocab - 1);
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t& t : out) t = id(rng);
  return out;
}

absl::StatusOr<std::vector<double>> Pooled(EncoderRunner& runner,
                                           const api::ModelDescription& d,
                                           const std::vector<int64_t>& period,
                                           int64_t length) {
  api::EmbedSpec spec;
  spec.token_ids.resize(static_cast<size_t>(length));
  for (int64_t i = 0; i < length; ++i) {
    spec.token_ids[static_cast<size_t>(i)] =
        period[static_cast<size_t>(i) % period.size()];
  }
  spec.pooling = d.config.pooling;
  std::vector<api::EmbedResult> results;
  RETURN_IF_ERROR(runner.RunEmbed({&spec}, &results));
  return std::vector<double>(results.at(0).pooled.begin(),
                             results.at(0).pooled.end());
}

double Drift(const std::vector<double>& now, const std::vector<double>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (now[i] - ref[i]) * (now[i] - ref[i]);
    scale += ref[i] * ref[i];
  }
  return scale > 0 ? std::sqrt(diff / scale) : std::sqrt(diff);
}

}  // namespace

std::vector<int64_t> ReachLengths(int64_t max_length, int64_t limit) {
  const int64_t n = PeriodLength(max_length);
  const int64_t reference = 4 * n;
  std::vector<int64_t> out;
  auto add = [&](int64_t length) {
    length = length / n * n;
    if (length > reference && length <= limit &&
        (out.empty() || length > out.back())) {
      out.push_back(length);
    }
  };
  for (double m : kMultiples) {
    add(static_cast<int64_t>(m * static_cast<double>(reference)));
  }
  add(limit);
  return out;
}

std::optional<int64_t> ReachLimit(const api::ModelDescription& d,
                                  LongInputPolicy server_policy,
                                  int64_t server_limit, double max_drift) {
  const LongInputPolicy policy = d.long_input.value_or(server_policy);
  const int64_t limit = d.max_extrapolation_tokens > 0
                            ? d.max_extrapolation_tokens
                            : server_limit;
  if (policy != LongInputPolicy::kAuto || max_drift <= 0 ||
      d.reach.max_length > 0 || ReachLengths(d.max_length, limit).empty()) {
    return std::nullopt;
  }
  return limit;
}

absl::StatusOr<api::MeasuredReach> MeasureLongInputReach(
    EncoderRunner& runner, const api::ModelDescription& d, int64_t limit,
    double max_drift) {
  const absl::Time start = absl::Now();
  api::MeasuredReach m;
  m.max_drift = max_drift;
  m.limit = limit;
  const int64_t n = PeriodLength(d.max_length);
  m.reference_length = 4 * n;
  m.holds_up_to = m.reference_length;
  m.source = Period(n, std::max<int64_t>(d.config.vocab_size, 1));
  ASSIGN_OR_RETURN(const std::vector<double> reference,
                   Pooled(runner, d, m.source, m.reference_length));
  for (int64_t length : ReachLengths(d.max_length, limit)) {
    ASSIGN_OR_RETURN(const std::vector<double> pooled,
                     Pooled(runner, d, m.source, length));
    const double drift = Drift(pooled, reference);
    m.lengths.push_back(length);
    m.drifts.push_back(drift);
    if (!(drift <= max_drift)) {
      m.breaks_at = length;
      break;
    }
    m.holds_up_to = length;
  }
  m.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return m;
}

}  // namespace encoder::runner

#include "server/batching/batch_profile.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"

namespace encoder::batching {
namespace {

// Powers of two up to the sequence limit, and the limit itself, within the
// token limit at `length`.
std::vector<int64_t> BatchSizes(const BatchProfileOptions& o, int64_t length) {
  int64_t most = std::min(o.max_batch_sequences,
                          o.max_batch_tokens / std::max<int64_t>(length, 1));
  const int64_t each = o.sequence_cost.At(length);
  if (o.max_batch_cost_bytes > 0 && each > 0) {
    most = std::min(most, o.max_batch_cost_bytes / each);
  }
  std::vector<int64_t> sizes;
  for (int64_t b = 1; b <= most; b *= 2) sizes.push_back(b);
  if (!sizes.empty() && sizes.back() != most) sizes.push_back(most);
  return sizes;
}

// `count` probe items of `length` tokens.
std::vector<BatchItem> ProbeBatch(const BatchProfileOptions& o, int64_t count,
                                  int64_t length) {
  std::vector<BatchItem> items;
  items.reserve(count);
  for (int64_t i = 0; i < count; ++i) items.push_back(o.probe_item(i, length));
  return items;
}

// The fastest of `runs` (at least one) runs of `items` on `runner`.
absl::StatusOr<absl::Duration> FastestRun(
    ModelRunner* runner, const std::vector<BatchItem>& items, int runs,
    const std::function<absl::Time()>& now) {
  std::vector<const BatchItem*> pointers;
  for (const BatchItem& item : items) pointers.push_back(&item);
  absl::Duration fastest = absl::InfiniteDuration();
  for (int r = 0; r < std::max(runs, 1); ++r) {
    std::vector<ItemResult> results;
    const absl::Time t0 = now();
    RETURN_IF_ERROR(runner->Run(pointers, &results, RunContext{}));
    fastest = std::min(fastest, now() - t0);
  }
  return fastest;
}

}  // namespace

absl::StatusOr<double> MeasureComputeScale(
    ModelRunner* runner, const std::vector<BatchItem>& probe,
    double work_per_second, int runs, const std::function<absl::Time()>& now) {
  int64_t longest = 0;
  for (const BatchItem& item : probe) longest = std::max(longest, item.length);
  int64_t work = 0;
  for (const BatchItem& item : probe) {
    work = AddSaturating(work, item.compute.At(longest));
  }
  if (probe.empty() || work <= 0 || !(work_per_second > 0)) {
    return absl::InvalidArgumentError(
        "a compute scale needs a probe with compute and a positive rate");
  }
  ASSIGN_OR_RETURN(const absl::Duration fastest,
                   FastestRun(runner, probe, runs, now));
  return absl::ToDoubleSeconds(fastest) * work_per_second /
         static_cast<double>(work);
}

absl::StatusOr<BatchProfile> MeasureBatchProfile(ModelRunner* runner,
                                                 const BatchProfileOptions& o) {
  if (!o.probe_item) {
    return absl::InvalidArgumentError("batch profile without probe items");
  }
  BatchProfile profile;
  const absl::Time start = o.now();
  const absl::Time deadline = start + o.budget;
  const int runs = std::max(o.runs_per_point, 1);
  std::vector<int64_t> lengths;
  for (int64_t length : o.lengths) {
    if (length > 0 && length <= o.max_length) lengths.push_back(length);
  }
  if (lengths.empty() && o.max_length > 0) lengths.push_back(o.max_length);

  // A run's expected time, from the last one measured, scaled by tokens.
  absl::Duration last_time = absl::ZeroDuration();
  int64_t last_tokens = 0;
  for (int64_t length : lengths) {
    const std::vector<int64_t> sizes = BatchSizes(o, length);
    double best = 0;
    bool complete = true;
    for (int64_t batch : sizes) {
      const absl::Duration expected =
          last_tokens == 0 ? absl::ZeroDuration()
                           : last_time * (static_cast<double>(batch * length) /
                                          static_cast<double>(last_tokens));
      if (o.now() + expected * runs > deadline) {
        complete = false;
        profile.budget_ran_out = true;
        break;
      }
      ASSIGN_OR_RETURN(
          const absl::Duration fastest,
          FastestRun(runner, ProbeBatch(o, batch, length), runs, o.now));
      last_time = fastest;
      last_tokens = batch * length;
      const double seconds = std::max(absl::ToDoubleSeconds(fastest), 1e-9);
      const double rate = static_cast<double>(batch) / seconds;
      profile.points.push_back(ProfilePoint{length, batch, rate});
      best = std::max(best, rate);
      if (rate < o.stop_fraction * best) break;  // the decline is seen
    }
    if (complete) profile.complete_lengths.push_back(length);
    if (profile.budget_ran_out) break;  // longer lengths cost more still
  }
  profile.caps =
      CapsFromPoints(profile.points, profile.complete_lengths, o.keep_fraction);
  profile.took = o.now() - start;
  return profile;
}

std::vector<LengthCap> CapsFromPoints(
    const std::vector<ProfilePoint>& points,
    const std::vector<int64_t>& complete_lengths, double keep_fraction) {
  std::vector<LengthCap> caps;
  for (int64_t length : complete_lengths) {
    double best = 0;
    for (const ProfilePoint& p : points) {
      if (p.length == length) best = std::max(best, p.sequences_per_s);
    }
    int64_t cap = 0;
    for (const ProfilePoint& p : points) {
      if (p.length == length && p.sequences_per_s >= keep_fraction * best) {
        cap = std::max(cap, p.batch);
      }
    }
    if (cap > 0) caps.push_back(LengthCap{length, cap});
  }
  std::sort(caps.begin(), caps.end(),
            [](const LengthCap& a, const LengthCap& b) {
              return a.length < b.length;
            });
  return caps;
}

std::string DescribeProfile(const BatchProfile& profile) {
  std::vector<std::string> parts;
  std::vector<int64_t> lengths;
  for (const ProfilePoint& p : profile.points) {
    if (lengths.empty() || lengths.back() != p.length) {
      lengths.push_back(p.length);
    }
  }
  for (int64_t length : lengths) {
    std::vector<std::string> rates;
    for (const ProfilePoint& p : profile.points) {
      if (p.length == length) {
        rates.push_back(absl::StrFormat("%d:%.1f", p.batch, p.sequences_per_s));
      }
    }
    std::string cap = "no cap (not measured to the end)";
    for (const LengthCap& c : profile.caps) {
      if (c.length == length) cap = absl::StrCat("cap ", c.max_sequences);
    }
    parts.push_back(absl::StrCat(length, " tokens: ", absl::StrJoin(rates, " "),
                                 " seq/s -> ", cap));
  }
  return absl::StrFormat(
      "%s (%.2f s%s)",
      parts.empty() ? "nothing measured" : absl::StrJoin(parts, "; "),
      absl::ToDoubleSeconds(profile.took),
      profile.budget_ran_out ? ", budget ran out" : "");
}

}  // namespace encoder::batching

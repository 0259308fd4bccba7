// The names of the model vocabulary's enums (config.h), in a library of
// their own without LibTorch: the core and the fronts render them.
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/model/config.h"

namespace encoder::model {

const char* RopeScalingName(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kNone:
      return "none";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kYarn:
      return "yarn";
    case RopeScalingType::kLlama3:
      return "llama3";
    case RopeScalingType::kDynamic:
      return "dynamic";
    case RopeScalingType::kLongrope:
      return "longrope";
    case RopeScalingType::kProportional:
      return "proportional";
  }
  return "none";
}

std::string ActivationName(Activation a) {
  switch (a) {
    case Activation::kRelu:
      return "relu";
    case Activation::kGelu:
      return "gelu";
    case Activation::kGeluTanh:
      return "gelu_tanh";
    case Activation::kSilu:
      return "silu";
    case Activation::kGeluNew:
      return "gelu_new";
    case Activation::kGeluFast:
      return "gelu_fast";
    case Activation::kQuickGelu:
      return "quick_gelu";
    case Activation::kMish:
      return "mish";
  }
  return "unknown";
}

std::string ScoreActivationName(ScoreActivation a) {
  switch (a) {
    case ScoreActivation::kIdentity:
      return "identity";
    case ScoreActivation::kSigmoid:
      return "sigmoid";
    case ScoreActivation::kSoftmax:
      return "softmax";
  }
  return "identity";
}

std::string PoolingName(Pooling p) {
  switch (p) {
    case Pooling::kMean:
      return "mean";
    case Pooling::kFirst:
      return "first";
    case Pooling::kMax:
      return "max";
    case Pooling::kLastToken:
      return "last_token";
    case Pooling::kWeightedMean:
      return "weighted_mean";
    case Pooling::kMeanSqrtLen:
      return "mean_sqrt_len";
  }
  return "unknown";
}

absl::StatusOr<Pooling> ParsePoolingName(const std::string& name) {
  for (Pooling p :
       {Pooling::kMean, Pooling::kFirst, Pooling::kMax, Pooling::kLastToken,
        Pooling::kWeightedMean, Pooling::kMeanSqrtLen}) {
    if (PoolingName(p) == name) return p;
  }
  if (name == "cls") return Pooling::kFirst;
  return absl::InvalidArgumentError(absl::StrCat(
      "pooling \"", name,
      "\" must be mean, first (or cls), max, last_token, weighted_mean or "
      "mean_sqrt_len"));
}

namespace {

constexpr std::pair<Dtype, const char*> kDtypeNames[] = {
    {Dtype::kFloat32, "float32"},
    {Dtype::kFloat16, "float16"},
    {Dtype::kBfloat16, "bfloat16"}};
constexpr std::pair<Precision, const char*> kPrecisionNames[] = {
    {Precision::kFloat32, "float32"},
    {Precision::kFloat16, "float16"},
    {Precision::kBfloat16, "bfloat16"},
    {Precision::kInt8, "int8"}};

}  // namespace

std::string DtypeName(Dtype dtype) {
  for (const auto& [d, name] : kDtypeNames) {
    if (d == dtype) return name;
  }
  return "unknown";
}

std::string PrecisionName(Precision precision) {
  for (const auto& [p, name] : kPrecisionNames) {
    if (p == precision) return name;
  }
  return "unknown";
}

absl::StatusOr<Dtype> ParseDtypeName(const std::string& name) {
  for (const auto& [d, known] : kDtypeNames) {
    if (name == known) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("must be float32, float16 or bfloat16, got ", name));
}

Precision PrecisionOf(Dtype dtype, bool int8) {
  if (int8) return Precision::kInt8;
  switch (dtype) {
    case Dtype::kFloat16:
      return Precision::kFloat16;
    case Dtype::kBfloat16:
      return Precision::kBfloat16;
    case Dtype::kFloat32:
      break;
  }
  return Precision::kFloat32;
}

}  // namespace encoder::model

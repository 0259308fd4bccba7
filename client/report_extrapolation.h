// The extrapolation part of the HTML report: one chart per measure with a
// line per model on shared axes (length as a multiple of each model's
// trained length), and a table of what each scheme's parameters allow.
#ifndef ENCODER_CLIENT_REPORT_EXTRAPOLATION_H_
#define ENCODER_CLIENT_REPORT_EXTRAPOLATION_H_

#include <string>
#include <vector>

#include "client/report.h"

namespace encoder_client {

// The value charted for one measure at one length: per-layer measures are
// averaged over layers; mean distance is divided by the length.
struct ExtrapolationMeasure {
  const char* title;
  const char* y_label;
  double (*value)(const encoder::v1::ExtrapolationPoint& point);
};

// The measures charted, in order.
const std::vector<ExtrapolationMeasure>& ExtrapolationMeasures();

// The <section id="extrapolation">; empty when no model has a probe.
std::string ExtrapolationSectionHtml(const std::vector<ModelDiagnosis>& models);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_REPORT_EXTRAPOLATION_H_

// libFuzzer target: the service's request layer for every RPC that takes
// bytes. The first input byte picks the message type; the rest is parsed
// as that request (the raw methods' parser, with its UTF-8 diagnosis) and,
// when it parses, validated against six small hosted models exactly as the
// RPC would before any forward pass: PrepareEmbed (limits, lengths, ids,
// layers, heads, cost), BuildDiagnoseOptions, RunTokenize, RunDecode,
// Rerank's and Classify's ToScoreQuery and PrepareScore, and EmbedSparse's
// ToSparseQuery and PrepareEmbed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "server/core/embed_request.h"
#include "server/model/weights/model_repository.h"
#include "server/runner/model_host.h"
#include "server/service/diagnose_convert.h"
#include "server/service/embed_proto.h"
#include "server/service/encoder_service.h"
#include "server/service/request_parser.h"
#include "server/service/score_proto.h"
#include "server/service/tokenize_rpc.h"

namespace svc = encoder::service;
namespace v1 = encoder::v1;

namespace {

encoder::runner::ModelHost* host = nullptr;

// Six tiny models, one per scheme, with a learned table of 24 positions.
encoder::model::Repository TinyRepository() {
  encoder::model::Repository repo;
  uint64_t seed = 1;
  for (const char* name :
       {"none", "sinusoidal", "learned", "rope", "alibi", "relative"}) {
    encoder::model::ModelSpec spec;
    spec.name = name;
    spec.config.vocab_size = 300;
    spec.config.d_model = 16;
    spec.config.num_heads = 2;
    spec.config.num_layers = 2;
    spec.config.d_ff = 32;
    spec.config.max_positions = 24;
    spec.config.max_input_tokens = 64;
    spec.config.positional.type = *encoder::model::ParseSchemeName(name);
    spec.seed = seed++;
    repo.models.push_back(spec);
  }
  repo.default_model = "sinusoidal";
  return repo;
}

grpc::ByteBuffer Buffer(const uint8_t* data, size_t size) {
  grpc::Slice slice(data, size);
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  encoder::runner::HostOptions options;
  options.warm_up = false;
  options.batch_memory_budget_bytes = 64 << 20;
  auto created = encoder::runner::ModelHost::Create(TinyRepository(), options);
  if (!created.ok()) std::abort();
  host = created->release();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const grpc::ByteBuffer bytes = Buffer(data + 1, size - 1);
  svc::ServiceLimits limits;
  limits.max_inputs_per_request = 16;
  limits.max_send_message_bytes = 4 << 20;
  limits.max_tokenize_texts_per_request = 16;
  switch (data[0] % 7) {
    case 0: {
      v1::EmbedRequest request;
      if (!svc::ParseRequest(bytes, &request).ok()) break;
      auto query = svc::ToEmbedQuery(&request);
      if (!query.ok()) break;
      auto prepared = encoder::core::PrepareEmbed(*query, *host, limits);
      if (prepared.ok()) (void)encoder::core::EstimateResponseBytes(*prepared);
      break;
    }
    case 1: {
      v1::DiagnoseRequest request;
      if (!svc::ParseRequest(bytes, &request).ok()) break;
      const encoder::api::ServedModel* model = host->Find(request.model());
      if (model == nullptr) break;
      encoder::core::DiagnoseLimits diagnose_limits;
      diagnose_limits.max_tokens = 64;
      diagnose_limits.max_structure_positions = 64;
      (void)encoder::core::BuildDiagnoseOptions(svc::ToDiagnoseQuery(request),
                                                *model, diagnose_limits);
      break;
    }
    case 2: {
      v1::TokenizeRequest request;
      v1::TokenizeResponse response;
      if (!svc::ParseRequest(bytes, &request).ok()) break;
      (void)svc::RunTokenize(request, *host, limits, &response);
      break;
    }
    case 3: {
      v1::DecodeRequest request;
      v1::DecodeResponse response;
      if (!svc::ParseRequest(bytes, &request).ok()) break;
      (void)svc::RunDecode(request, *host, limits, &response);
      break;
    }
    case 4: {
      v1::RerankRequest request;
      if (!svc::ParseRequest(bytes, &request).ok()) break;
      auto query = svc::ToScoreQuery(request);
      if (query.ok()) (void)encoder::core::PrepareScore(*query, *host, limits);
      break;
    }
    case 5: {
      v1::ClassifyRequest request;
      if (!svc::ParseRequest(bytes, &request).ok()) break;
      auto query = svc::ToScoreQuery(request);
      if (query.ok()) (void)encoder::core::PrepareScore(*query, *host, limits);
      break;
    }
    case 6: {
      v1::EmbedSparseRequest request;
      if (!svc::ParseRequest(bytes, &request).ok()) break;
      (void)encoder::core::PrepareEmbed(svc::ToSparseQuery(&request), *host,
                                        limits);
      break;
    }
  }
  return 0;
}

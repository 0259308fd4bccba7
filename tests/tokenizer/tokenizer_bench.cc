// Tokenizer throughput on one core: the hostile corpus lines, repeated to
// about 1 MB, encoded one input at a time with each fixture tokenizer.
// Compare with bench_reference.js (the Rust library on the same inputs).
// Usage: tokenizer_bench FIXTURE_DIR CORPUS.jsonl [ROUNDS [SPM_FIXTURE_DIR]]
// SPM_FIXTURE_DIR (make_spm_reference.py's output) adds the SentencePiece
// .model directories.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/tokenizer/byte_tokenizer.h"
#include "server/tokenizer/tokenizer.h"

namespace {

using encoder::tokenizer::EncodeOptions;
using encoder::tokenizer::Tokenizer;

std::vector<std::string> Inputs(const char* corpus_path, size_t* bytes) {
  std::vector<std::string> lines;
  std::ifstream in(corpus_path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  }
  std::vector<std::string> inputs;
  *bytes = 0;
  for (size_t i = 0; *bytes < (1u << 20); ++i) {
    const std::string& s = lines[i % lines.size()];
    if (s.empty()) continue;
    inputs.push_back(s);
    *bytes += s.size();
  }
  return inputs;
}

// Best of `rounds` passes over all inputs: seconds, and tokens produced.
double Measure(const Tokenizer& tok, const std::vector<std::string>& inputs,
               int rounds, size_t* tokens) {
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    size_t n = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (const std::string& s : inputs) {
      auto e = tok.Encode(s, EncodeOptions{});
      if (!e.ok()) {
        std::fprintf(stderr, "encode failed: %s\n",
                     e.status().ToString().c_str());
        std::exit(1);
      }
      n += e->size();
    }
    best = std::min(best, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - t0)
                              .count());
    *tokens = n;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s FIXTURE_DIR CORPUS.jsonl [ROUNDS "
                 "[SPM_FIXTURE_DIR]]\n",
                 argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 3;
  size_t bytes = 0;
  const std::vector<std::string> inputs = Inputs(argv[2], &bytes);
  std::printf("%zu inputs, %zu bytes, best of %d rounds, one thread\n",
              inputs.size(), bytes, rounds);
  std::printf("%-22s %-10s %10s %12s %14s\n", "fixture", "kind", "MB/s",
              "tokens", "us/128 tokens");
  auto report = [&](const std::string& name, const Tokenizer& tok) {
    size_t tokens = 0;
    const double s = Measure(tok, inputs, rounds, &tokens);
    std::printf("%-22s %-10s %10.2f %12zu %14.2f\n", name.c_str(),
                tok.kind().c_str(), bytes / s / 1e6, tokens,
                s / tokens * 128 * 1e6);
  };
  for (const char* name :
       {"bert_vocab", "wordpiece_trained", "gpt2", "llama3", "qwen3", "gemma3",
        "unigram_always", "spm_nmt_nfkc"}) {
    auto tok = encoder::tokenizer::LoadTokenizerFromDirectory(dir + "/" + name);
    if (!tok.ok()) {
      std::fprintf(stderr, "%s: %s\n", name, tok.status().ToString().c_str());
      return 1;
    }
    report(name, **tok);
  }
  if (argc > 4) {
    const std::string spm_dir = argv[4];
    for (const char* name : {"t5_unigram", "t5_bpe", "xlmr_bpe"}) {
      auto tok =
          encoder::tokenizer::LoadTokenizerFromDirectory(spm_dir + "/" + name);
      if (!tok.ok()) {
        std::fprintf(stderr, "%s: %s\n", name, tok.status().ToString().c_str());
        return 1;
      }
      report(std::string("spm_") + name, **tok);
    }
  }
  report("builtin_byte", encoder::tokenizer::ByteTokenizer(1 << 20));
  return 0;
}

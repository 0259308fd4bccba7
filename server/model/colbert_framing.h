// How a PyLate ColBERT model frames its queries and documents
// (config_sentence_transformers.json, as pylate.models.ColBERT reads it):
// a marker token after the first, queries padded with mask tokens to a
// fixed length (query expansion), documents cut to their own length and
// their punctuation left out of the scoring (the skiplist). Plain data, no
// LibTorch (docs/rerank-classify-sparse.md#colbert-models-pylate).
#ifndef ENCODER_SERVER_MODEL_COLBERT_FRAMING_H_
#define ENCODER_SERVER_MODEL_COLBERT_FRAMING_H_

#include <cstdint>
#include <string>
#include <vector>

namespace encoder::model {

struct ColbertFraming {
  // The marker texts and their token ids, inserted after each sequence's
  // first token; an empty text (id -1) inserts nothing.
  std::string query_prefix, document_prefix;
  int64_t query_prefix_id = -1, document_prefix_id = -1;
  // Tokens per query and at most per document, the marker included: a
  // text is cut to one token fewer (its end token kept) before the marker
  // goes in.
  int64_t query_length = 0, document_length = 0;
  // Queries shorter than query_length are padded with expansion_id (the
  // mask token) to it, and every position is scored.
  bool query_expansion = true;
  int64_t expansion_id = -1;
  // The real tokens attend to the expansion tokens too; false: the
  // expansion tokens attend to the real ones, which never see them.
  bool attend_to_expansion = false;
  // Document tokens with these ids (sorted, unique) have no vector in the
  // scoring: the ids of the skiplist words, each looked up as one token
  // (the unknown token's id when the vocabulary lacks it).
  std::vector<std::string> skiplist_words;
  std::vector<int64_t> skiplist_ids;
};

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_COLBERT_FRAMING_H_

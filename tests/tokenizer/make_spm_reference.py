#!/usr/bin/python3
"""SentencePiece model directories and their expected encodings.

Trains tiny SentencePiece models (python3-sentencepiece; Unigram and BPE) on
a small corpus written here in several scripts, and writes them into model
directories the way checkpoints ship them:
  t5_unigram/spiece.model     + tokenizer_config.json (T5Tokenizer, 3
                                 <extra_id_N> sentinels, model_max_length)
  t5_bpe/spiece.model           (alone; byte fallback on)
  t5_lower/spiece.model       + tokenizer_config.json (do_lower_case)
  xlmr_bpe/sentencepiece.bpe.model + tokenizer_config.json
  xlmr_unigram/sentencepiece.bpe.model (alone)
For every directory it writes <name>.json with the expected encoding of each
text of a varied corpus (tests/tokenizer/corpus plus the cases below),
computed from the sentencepiece library itself with the rules of the
Hugging Face slow tokenizers applied here:
  - the text is split on the special tokens first (leftmost, longest; a
    token with lstrip, XLM-R's <mask>, takes the whitespace before it);
  - every other part goes through SentencePiece as piece strings, which
    become ids as T5Tokenizer (piece_to_id) or XLMRobertaTokenizer (fairseq:
    <s> 0, <pad> 1, </s> 2, <unk> 3, piece id + 1, piece id 0 -> <unk>,
    <mask> last) convert them;
  - T5 appends </s> unless the sequence already ends with it; XLM-R wraps
    the sequence in <s> ... </s>; truncation drops text tokens first.
Offsets come from SentencePiece's own spans (in code points, as Python
reports them), converted to UTF-8 bytes here. Decoding follows
T5Tokenizer.convert_tokens_to_string (pieces through SentencePiece's
decoder, special tokens verbatim after a space, stripped).
Sentence pairs follow tokenizer(a, b, truncation=True, max_length=n):
truncate_sequences' longest_first (written out below), then
build_inputs_with_special_tokens(a, b) (T5: A </s> B </s>, each </s> only
where its sequence does not already end with one; XLM-R: <s> A </s></s>
B </s>) and create_token_type_ids_from_sequences (every type id 0).
Usage: make_spm_reference.py CORPUS_DIR OUT_DIR
"""
import io
import json
import os
import sys

import sentencepiece as spm

# The training corpus: several scripts, so that the models have pieces for
# Latin, Cyrillic, Greek, CJK, Arabic, Devanagari and a few emoji; whatever
# else the test texts hold is unknown to them.
TRAIN = [
    "The quick brown fox jumps over the lazy dog.",
    "Tokenizers split text into words and words into pieces.",
    "Positional encodings tell a transformer where each token is.",
    "Attention with linear biases adds a penalty proportional to distance.",
    "Héllo wörld, café naïve résumé, Ångström and Ærøskøbing.",
    "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "Καλημέρα κόσμε, η γλώσσα είναι ελληνική.",
    "日本語のテキストを小さな断片に分割します。",
    "中文文本也需要分词，这是一个测试句子。",
    "한국어 문장도 조금 있습니다.",
    "مرحبا بالعالم، هذه جملة عربية قصيرة.",
    "नमस्ते दुनिया, यह एक छोटा वाक्य है।",
    "Numbers 12345 and 3.14159 and 2024-01-31, prices $5.99.",
    "Emoji 😀 🎉 👍 in text, and punctuation: (a) [b] {c} <d>!?",
    "Sentence pieces treat whitespace as a normal symbol.",
    "Unigram and BPE models are both trained here on this corpus.",
]

# Test texts beyond the shared corpus files: edge cases and special tokens.
EXTRA = [
    "",
    " ",
    "   leading and trailing   ",
    "tabs\tand\nnewlines\r\nmixed  \u3000 ideographic space",
    "a" * 300,
    "ab\u0301c e\u0301 n\u0303 \u0915\u093f \u0e01\u0e34",  # combining marks
    "\U0001F468\u200D\U0001F469\u200D\U0001F467 \U0001F1EF\U0001F1F5 "
    "\U0001F44D\U0001F3FD",  # ZWJ sequence, flag, skin tone
    "\uFFFD \u0000 \u200B zero\u200Bwidth \U0010FFFD",
    "\U0001D400\U0001D401 \uFF21\uFF22 \u2460 \uFB01",  # NFKC at work
    "Hello </s>",
    "two</s>specials<pad>inside<unk>here",
    "</s></s>",
    "fill <mask> here and<mask>there <s>start",
    "sentinels <extra_id_0> and <extra_id_2><extra_id_1>",
    "Mixed 日本語 and English and Русский 😀 together",
]

T5_IDS = dict(pad_id=0, eos_id=1, unk_id=2, bos_id=-1)  # as T5's spiece.model
FAIRSEQ = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}


def train(model_type, vocab_size, **ids):
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TRAIN * 3), model_writer=out,
        model_type=model_type, vocab_size=vocab_size,
        character_coverage=0.9995, hard_vocab_limit=False, minloglevel=2,
        **ids)
    return out.getvalue()


def corpus(corpus_dir):
    texts = []
    with open(os.path.join(corpus_dir, "train.txt"), encoding="utf-8") as f:
        texts += [line.rstrip("\n") for line in f]
    for name in ("hostile.jsonl", "charsmap.jsonl"):
        with open(os.path.join(corpus_dir, name), encoding="utf-8") as f:
            texts += [json.loads(line) for line in f if line.strip()]
    return texts + EXTRA


class Reference:
    """One model directory's rules, written from the slow tokenizers."""

    def __init__(self, family, model, extra_ids=0, lower=False,
                 max_length=None):
        self.family, self.sp = family, spm.SentencePieceProcessor()
        self.sp.LoadFromSerializedProto(model)
        self.size = self.sp.get_piece_size()
        self.lower, self.max_length = lower, max_length
        self.specials = {}  # content -> (id, lstrip)
        if family == "t5":
            self.vocab_size = self.size + extra_ids
            self.eos = self.sp.piece_to_id("</s>")
            for name in ("</s>", "<unk>", "<pad>"):
                self.specials[name] = (self.sp.piece_to_id(name), False)
            for n in range(extra_ids):
                self.specials[f"<extra_id_{n}>"] = (self.vocab_size - 1 - n,
                                                    False)
        else:
            self.vocab_size = self.size + 2
            for name, i in FAIRSEQ.items():
                self.specials[name] = (i, False)
            self.specials["<mask>"] = (self.size + 1, True)
        self.names = {i: name for name, (i, _) in self.specials.items()}

    def piece_id(self, piece):
        if self.family == "t5":
            return self.sp.piece_to_id(piece)
        if piece in FAIRSEQ:
            return FAIRSEQ[piece]
        i = self.sp.piece_to_id(piece)
        return i + 1 if i else FAIRSEQ["<unk>"]

    def label(self, i):
        if i in self.names:
            return self.names[i]
        return self.sp.id_to_piece(i if self.family == "t5" else i - 1)

    def split(self, text):
        """(start, end, id or None) in code points, specials first."""
        names = sorted(self.specials, key=len, reverse=True)
        parts, start, pos = [], 0, 0
        while pos < len(text):
            hit = next((n for n in names if text.startswith(n, pos)), None)
            if hit is None:
                pos += 1
                continue
            i, lstrip = self.specials[hit]
            begin, pos = pos, pos + len(hit)
            if lstrip:
                while begin > start and text[begin - 1].isspace():
                    begin -= 1
            if start < begin:
                parts.append((start, begin, None))
            parts.append((begin, pos, i))
            start = pos
        if start < len(text):
            parts.append((start, len(text), None))
        return parts

    def tokenize(self, text):
        ids, tokens, chars = [], [], []
        for start, end, special in self.split(text):
            if special is not None:
                ids.append(special)
                tokens.append(self.label(special))
                chars.append([start, end])
                continue
            part = text[start:end]
            if self.lower:
                part = part.lower()
            pieces = self.sp.encode(part, out_type=str)
            spans = self.sp.encode(part, out_type="immutable_proto").pieces
            assert len(pieces) == len(spans)
            for piece, span in zip(pieces, spans):
                i = self.piece_id(piece)
                ids.append(i)
                tokens.append(self.label(i))
                chars.append([start + span.begin, start + span.end])
        return ids, tokens, chars

    def encode(self, text, max_length=None, side="right"):
        ids, tokens, chars = self.tokenize(text)
        added = 1 if self.family == "t5" else 2
        if max_length is not None and len(ids) > max_length - added:
            keep = max(0, max_length - added)
            cut = slice(0, keep) if side == "right" else slice(
                len(ids) - keep, len(ids))
            ids, tokens, chars = ids[cut], tokens[cut], chars[cut]
        mask = [0] * len(ids)
        if self.family == "t5":
            if not ids or ids[-1] != self.eos:
                ids, tokens = ids + [self.eos], tokens + ["</s>"]
                chars, mask = chars + [[0, 0]], mask + [1]
        else:
            ids = [0] + ids + [2]
            tokens = ["<s>"] + tokens + ["</s>"]
            chars, mask = [[0, 0]] + chars + [[0, 0]], [1] + mask + [1]
        return ids, tokens, chars, mask

    def added(self, pair):
        """num_special_tokens_to_add(pair)."""
        one = 1 if self.family == "t5" else 2
        return 2 * one if pair else one

    def encode_pair(self, a, b, max_length=None, side="right"):
        """Each text's tokens (id, token, code point span, mask, sequence
        id; special tokens -1), joined; spans index their own text."""
        ids = [self.tokenize(a), self.tokenize(b)]
        if max_length is not None:
            remove = len(ids[0][0]) + len(ids[1][0]) + self.added(True) - \
                max_length
            moves = longest_first_moves(len(ids[0][0]), len(ids[1][0]), remove)
            ids = [tuple(cut(column, move, side) for column in part)
                   for part, move in zip(ids, moves)]
        out = {"ids": [], "tokens": [], "chars": [], "bytes": [], "mask": [],
               "sequence_ids": []}
        for seq, (text, (part_ids, tokens, chars)) in enumerate(
                zip((a, b), ids)):
            n = len(part_ids)
            rows = list(zip(part_ids, tokens, chars, byte_offsets(text, chars),
                            [0] * n, [seq] * n))
            special = lambda i: (i, self.label(i), [0, 0], [0, 0], 1, -1)
            if self.family == "t5":
                if not part_ids or part_ids[-1] != self.eos:
                    rows.append(special(self.eos))
            else:
                rows = [special(0 if seq == 0 else 2)] + rows + [special(2)]
            for row in rows:
                for key, value in zip(("ids", "tokens", "chars", "bytes",
                                       "mask", "sequence_ids"), row):
                    out[key].append(value)
        return out

    def decode(self, ids, skip_special):
        special = set(self.names)
        out, run, previous_special = "", [], False
        for i in ids:
            if i in special and skip_special:
                continue
            if i in special:
                if not previous_special:
                    out += " "
                out += self.sp.decode(run) + self.label(i)
                run, previous_special = [], True
            else:
                run.append(self.label(i))
                previous_special = False
        out += self.sp.decode(run)
        return out.strip()


def longest_first_moves(len_ids, len_pair, num_tokens_to_remove):
    """Tokens truncate_sequences (longest_first, a pair) takes off each."""
    if num_tokens_to_remove <= 0:
        return 0, 0
    first_remove = min(abs(len_pair - len_ids), num_tokens_to_remove)
    second_remove = num_tokens_to_remove - first_remove
    if len_ids > len_pair:
        ids_to_move = first_remove + second_remove // 2
        pair_ids_to_move = second_remove - second_remove // 2
    else:
        ids_to_move = second_remove // 2
        pair_ids_to_move = first_remove + second_remove - (second_remove // 2)
    return ids_to_move, pair_ids_to_move


def cut(column, move, side):
    """ids[:-move] (right) or ids[move:] (left), as truncate_sequences."""
    if side == "right":
        return column[:-move] if move > 0 else column
    return column[move:]


def pair_cases(ref, texts):
    """Pairs of the corpus texts (with empty and long ones), whole and
    truncated on both sides; max_length 0 is the model's own limit."""
    n = len(texts)
    pairs = [(t, texts[(i * 5 + 2) % n]) for i, t in enumerate(texts)]
    pairs += [("", texts[0]), (texts[1], ""), ("", ""),
              (" ".join(texts[:12]), texts[7]),
              (texts[4], " ".join(texts[12:30]))]
    added = ref.added(True)
    out = []
    for a, b in pairs:
        runs = [(None, "right")] + [(added + extra, side)
                                    for extra in (0, 3, 10)
                                    for side in ("right", "left")]
        if ref.max_length is not None:
            runs.append((0, "right"))
        for max_length, side in runs:
            limit = ref.max_length if max_length == 0 else max_length
            case = dict(a=a, b=b, added=added,
                        **ref.encode_pair(a, b, limit, side))
            if max_length is not None:
                case["max_length"], case["side"] = max_length, side
            out.append(case)
    return out


def byte_offsets(text, chars):
    return [[len(text[:s].encode()), len(text[:e].encode())] for s, e in chars]


def cases(ref, texts):
    out = []
    for text in texts:
        runs = [(None, "right")]
        if len(text) > 20:
            runs += [(8, "right"), (8, "left")]
        if ref.max_length is not None:
            runs.append((0, "right"))
        for max_length, side in runs:
            limit = ref.max_length if max_length == 0 else max_length
            ids, tokens, chars, mask = ref.encode(text, limit, side)
            case = {"text": text, "ids": ids, "tokens": tokens,
                    "chars": chars, "bytes": byte_offsets(text, chars),
                    "mask": mask}
            if max_length is not None:
                case["max_length"], case["side"] = max_length, side
            else:
                case["decoded"] = ref.decode(ids, False)
                case["decoded_skip"] = ref.decode(ids, True)
            out.append(case)
    return out


def same_length_lower(text):
    """Texts whose lower-casing maps each character to one character and
    has no context rule (Greek final sigma), so offsets carry over."""
    return all(len(c.lower()) == 1 for c in text) and "\u03a3" not in text


def write_dir(out_dir, name, file, model, config):
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, file), "wb") as f:
        f.write(model)
    if config is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump(config, f)
    return d


def main():
    corpus_dir, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    texts = corpus(corpus_dir)
    unigram_t5 = train("unigram", 400, **T5_IDS)
    bpe_t5 = train("bpe", 700, byte_fallback=True, **T5_IDS)
    unigram = train("unigram", 400)
    bpe = train("bpe", 400)
    sentinels = [f"<extra_id_{n}>" for n in range(3)]
    dirs = [
        ("t5_unigram", "spiece.model", unigram_t5,
         {"tokenizer_class": "T5Tokenizer", "extra_ids": 3,
          "additional_special_tokens": sentinels, "model_max_length": 16},
         Reference("t5", unigram_t5, extra_ids=3, max_length=16), texts),
        ("t5_bpe", "spiece.model", bpe_t5, None,
         Reference("t5", bpe_t5), texts),
        ("t5_lower", "spiece.model", unigram_t5,
         {"tokenizer_class": "T5Tokenizer", "do_lower_case": True},
         Reference("t5", unigram_t5, lower=True),
         [t for t in texts if same_length_lower(t)]),
        ("xlmr_bpe", "sentencepiece.bpe.model", bpe,
         {"tokenizer_class": "XLMRobertaTokenizer"},
         Reference("xlmr", bpe), texts),
        ("xlmr_unigram", "sentencepiece.bpe.model", unigram, None,
         Reference("xlmr", unigram), texts),
    ]
    for name, file, model, config, ref, subset in dirs:
        d = write_dir(out_dir, name, file, model, config)
        expected = {"dir": d, "family": ref.family,
                    "vocab_size": ref.vocab_size, "cases": cases(ref, subset),
                    "pairs": pair_cases(ref, subset)}
        with open(os.path.join(out_dir, name + ".json"), "w",
                  encoding="utf-8") as f:
            json.dump(expected, f, ensure_ascii=False)
        tokens = sum(len(c["ids"]) for c in expected["cases"])
        print(f"{name}: {ref.size} pieces, {len(expected['cases'])} cases, "
              f"{tokens} tokens, {len(expected['pairs'])} pair cases")


if __name__ == "__main__":
    main()

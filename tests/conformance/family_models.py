"""Every supported family built by transformers itself: a seeded random
model from a config with unusual shapes (head widths that are not powers of
two, odd head and layer counts, tied and untied embeddings), saved with
save_pretrained as float32, float16, bfloat16 or sharded safetensors,
or as a pytorch_model.bin pickle alone that scripts/convert_to_safetensors.py
converts (the reference then reads the pickle, the server the conversion),
with a tokenizer trained by the tokenizers library on the conformance
corpus. JinaBERT is remote code, not in transformers, and keeps the
project's own reference (tests/hf).

build(out_dir) writes one directory per entry of FAMILIES and returns
[(name, family, path)].
"""
import pathlib
import subprocess
import sys

import torch
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

import corpus

VOCAB = 700
# transformers' Qwen2Tokenizer pre-tokenizing pattern.
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|"
              r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CONVERT = (pathlib.Path(__file__).resolve().parents[2] / "scripts" /
           "convert_to_safetensors.py")


_TOKENIZERS = {}


def tokenizer(kind):
    """The tokenizer of `kind` (see _train), trained once per process."""
    if kind not in _TOKENIZERS:
        _TOKENIZERS[kind] = _train(kind)
    return _TOKENIZERS[kind]


def bert_token_types(path):
    """Writes token_type_ids into the saved tokenizer's model inputs, as
    BERT's own tokenizer classes have them: the reference then feeds a
    pair's second text as type 1 (a generic tokenizer class feeds zeros)."""
    import json
    config_file = pathlib.Path(path) / "tokenizer_config.json"
    tok_config = json.loads(config_file.read_text())
    tok_config["model_input_names"] = [
        "input_ids", "token_type_ids", "attention_mask"]
    config_file.write_text(json.dumps(tok_config, indent=2))


def sized_config(make_config, tok):
    """make_config()'s config with `tok`'s vocabulary size."""
    config = make_config()
    config.vocab_size = len(tok)
    return config


def _train(kind):
    """A tokenizer.json-backed PreTrainedTokenizerFast of one of three
    kinds: BERT WordPiece ([CLS] A [SEP]), RoBERTa byte-level BPE
    (<s> A </s>), or SentencePiece-style Unigram with Metaspace (A </s>)."""
    texts = corpus.TEXTS * 2
    if kind == "wordpiece":
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        tok.train_from_iterator(texts, trainers.WordPieceTrainer(
            vocab_size=VOCAB, special_tokens=specials))
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", tok.token_to_id("[CLS]")),
                            ("[SEP]", tok.token_to_id("[SEP]"))])
        names = dict(unk_token="[UNK]", pad_token="[PAD]",
                     cls_token="[CLS]", sep_token="[SEP]",
                     mask_token="[MASK]")
    elif kind == "bpe":
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(texts, trainers.BpeTrainer(
            vocab_size=VOCAB, special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        tok.post_processor = processors.RobertaProcessing(
            ("</s>", tok.token_to_id("</s>")), ("<s>", tok.token_to_id("<s>")),
            trim_offsets=True, add_prefix_space=False)
        names = dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                     pad_token="<pad>", cls_token="<s>", sep_token="</s>",
                     mask_token="<mask>")
    elif kind == "qwen":
        # Qwen's byte-level BPE: NFC, its split pattern (single digits),
        # then bytes; the end-of-text token appended, as Qwen3-Embedding's
        # tokenizer does. transformers' Qwen2Tokenizer rebuilds this same
        # pipeline whatever tokenizer.json says.
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        tok = Tokenizer(models.BPE())
        tok.normalizer = normalizers.NFC()
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False,
                                     use_regex=False)])
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(texts, trainers.BpeTrainer(
            vocab_size=VOCAB, special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        tok.post_processor = processors.TemplateProcessing(
            single="$A <|endoftext|>", pair="$A <|endoftext|> $B:1",
            special_tokens=[("<|endoftext|>",
                             tok.token_to_id("<|endoftext|>"))])
        names = dict(eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                     unk_token="<|endoftext|>")
    else:  # unigram
        specials = ["<pad>", "</s>", "<unk>"]
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.NFKC()
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        tok.train_from_iterator(texts, trainers.UnigramTrainer(
            vocab_size=VOCAB, special_tokens=specials, unk_token="<unk>"))
        tok.post_processor = processors.TemplateProcessing(
            single="$A </s>", pair="$A </s> $B </s>",
            special_tokens=[("</s>", tok.token_to_id("</s>"))])
        names = dict(eos_token="</s>", unk_token="<unk>", pad_token="<pad>")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **names)
    fast.model_max_length = 512
    return fast


def _bert():
    return transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=60, num_hidden_layers=3,
        num_attention_heads=5, intermediate_size=84,
        max_position_embeddings=300, hidden_act="gelu")


def _roberta(cls=transformers.RobertaConfig):
    return cls(
        vocab_size=VOCAB, hidden_size=63, num_hidden_layers=3,
        num_attention_heads=7, intermediate_size=90,
        max_position_embeddings=302, pad_token_id=1, bos_token_id=0,
        eos_token_id=2, hidden_act="gelu")


def _mpnet():
    return transformers.MPNetConfig(
        vocab_size=VOCAB, hidden_size=60, num_hidden_layers=3,
        num_attention_heads=5, intermediate_size=84,
        max_position_embeddings=302, pad_token_id=1,
        relative_attention_num_buckets=32, layer_norm_eps=1e-5)


def _distilbert():
    return transformers.DistilBertConfig(
        vocab_size=VOCAB, dim=60, n_layers=3, n_heads=5, hidden_dim=84,
        max_position_embeddings=300)


def _electra():
    return transformers.ElectraConfig(
        vocab_size=VOCAB, embedding_size=60, hidden_size=60,
        num_hidden_layers=3, num_attention_heads=5, intermediate_size=84,
        max_position_embeddings=300)


def _roformer():
    return transformers.RoFormerConfig(
        vocab_size=VOCAB, hidden_size=60, embedding_size=60,
        num_hidden_layers=3, num_attention_heads=3, intermediate_size=84,
        max_position_embeddings=300)


def _modernbert():
    # Rotary bases other than the defaults (160000 / 10000), saved as
    # transformers 4 spells them (global_rope_theta / local_rope_theta) or
    # as 5 does (rope_parameters per layer type).
    return transformers.ModernBertConfig(
        vocab_size=VOCAB, hidden_size=72, num_hidden_layers=3,
        num_attention_heads=3, intermediate_size=60,
        max_position_embeddings=300, global_attn_every_n_layers=2,
        local_attention=8, global_rope_theta=40000.0,
        local_rope_theta=5000.0, pad_token_id=0, bos_token_id=2,
        eos_token_id=3, cls_token_id=2, sep_token_id=3)


def _modernbert_scaled():
    # Every layer type scaled: yarn on the global layers over an original
    # context of 32 (so the corpus runs past it), linear by 2 on the
    # sliding ones, each on its own base; 4.x spells one rope_scaling,
    # which scales both types alike.
    yarn = {"rope_type": "yarn", "factor": 300 / 32,
            "original_max_position_embeddings": 32}
    if int(transformers.__version__.split(".")[0]) >= 5:
        rope = {"rope_parameters": {
            "full_attention": {"rope_theta": 40000.0, **yarn},
            "sliding_attention": {"rope_type": "linear", "factor": 2.0,
                                  "rope_theta": 5000.0}}}
    else:
        rope = {"global_rope_theta": 40000.0, "local_rope_theta": 5000.0,
                "rope_scaling": yarn}
    config = _modernbert().to_dict()
    for key in ("rope_parameters", "rope_scaling", "global_rope_theta",
                "local_rope_theta"):
        config.pop(key, None)
    return transformers.ModernBertConfig(**{**config, **rope})


def _t5(gated):
    return transformers.T5Config(
        vocab_size=VOCAB, d_model=40, d_kv=12, num_heads=3, num_layers=3,
        d_ff=56, feed_forward_proj="gated-gelu" if gated else "relu",
        relative_attention_num_buckets=16,
        relative_attention_max_distance=40, pad_token_id=0,
        eos_token_id=1, decoder_start_token_id=0,
        tie_word_embeddings=not gated)


def _marian():
    return transformers.MarianConfig(
        vocab_size=VOCAB, d_model=36, encoder_layers=3, decoder_layers=1,
        encoder_attention_heads=3, decoder_attention_heads=3,
        encoder_ffn_dim=52, decoder_ffn_dim=52, max_position_embeddings=300,
        pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
        scale_embedding=True, activation_function="swish")


def _rope(theta):
    """A rotary base as this transformers generation spells it: 5.x's
    rope_parameters, 4.x's rope_theta (which 4.x would otherwise keep as
    an unread attribute, leaving its default base)."""
    if int(transformers.__version__.split(".")[0]) >= 5:
        return {"rope_parameters": {"rope_type": "default",
                                    "rope_theta": theta}}
    return {"rope_theta": theta}


def _rope_scaled(theta, scaling):
    """A rotary base with a scaled type, as this transformers generation
    spells it: 5.x's rope_parameters holding both, 4.x's rope_theta beside
    rope_scaling."""
    if int(transformers.__version__.split(".")[0]) >= 5:
        return {"rope_parameters": {"rope_theta": theta, **scaling}}
    return {"rope_theta": theta, "rope_scaling": dict(scaling)}


def _qwen2():
    # Grouped-query attention (6 query heads over 2 key/value heads),
    # biased q, k and v, a rotary base of 50000.
    return transformers.Qwen2Config(
        vocab_size=VOCAB, hidden_size=48, intermediate_size=76,
        num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2,
        max_position_embeddings=300, rms_norm_eps=1e-6,
        tie_word_embeddings=True, **_rope(50000.0))


def _qwen3():
    # head_dim 12 with 4 heads over a width of 40 (the heads are wider than
    # the model), 2 key/value heads, per-head q/k norms.
    return transformers.Qwen3Config(
        vocab_size=VOCAB, hidden_size=40, intermediate_size=52,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        head_dim=12, max_position_embeddings=300, rms_norm_eps=1e-6,
        tie_word_embeddings=False, **_rope(1000000.0))


def _qwen3_yarn():
    # yarn over a short original context (32 of 300 positions), so the
    # corpus runs past it; the default betas and attention factor.
    config = _qwen3()
    return transformers.Qwen3Config(
        **{**config.to_dict(), **_rope_scaled(
            1000000.0, {"rope_type": "yarn", "factor": 300 / 32,
                        "original_max_position_embeddings": 32})})


def _qwen2_linear():
    # Position interpolation by 2.5 on Qwen2's base of 50000.
    config = _qwen2()
    return transformers.Qwen2Config(
        **{**config.to_dict(), **_rope_scaled(
            50000.0, {"rope_type": "linear", "factor": 2.5})})


def _qwen3_llama3():
    # llama3's bands over an original context of 64 on a base of 10000:
    # with heads of 12 channels, one frequency kept, one smoothed, the
    # rest divided by 8.
    config = _qwen3()
    return transformers.Qwen3Config(
        **{**config.to_dict(), **_rope_scaled(
            10000.0, {"rope_type": "llama3", "factor": 8.0,
                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 64})})


def _qwen3_dynamic():
    # NTK-aware dynamic scaling: the base grows with each sequence's extent
    # past max_position_embeddings (300).
    config = _qwen3()
    return transformers.Qwen3Config(
        **{**config.to_dict(), **_rope_scaled(
            1000000.0, {"rope_type": "dynamic", "factor": 4.0})})


def _qwen2_longrope():
    # longrope over an original context of 32 (of 300 positions): short
    # factors up to 32 tokens, long ones past it; heads of 8 channels take
    # 4 factors each, the attention factor from 300 / 32.
    # The original context at the top level, as Phi-3 spells it: both
    # transformers generations read it there (4.x nowhere else).
    config = _qwen2()
    return transformers.Qwen2Config(
        **{**config.to_dict(), "original_max_position_embeddings": 32,
           **_rope_scaled(
               50000.0, {"rope_type": "longrope",
                         "short_factor": [1.0, 1.1, 1.3, 1.6],
                         "long_factor": [1.0, 2.5, 6.0, 14.0]})})


def _llama(scaling=None, bias=True, original=None):
    # Llama with 6 query heads over 2 key/value heads of 8 channels; with
    # `bias`, q/k/v/output (attention_bias) and gate/up/down (mlp_bias)
    # biased.
    rope = (_rope_scaled(10000.0, scaling) if scaling else _rope(10000.0))
    return transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=48, intermediate_size=76,
        num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2,
        max_position_embeddings=300, rms_norm_eps=1e-5,
        attention_bias=bias, mlp_bias=bias, tie_word_embeddings=False,
        **({"original_max_position_embeddings": original} if original
           else {}), **rope)


def _mistral(scaling=None, window=None):
    # Mistral with head_dim 10 (wider than hidden / heads = 8), 4 query
    # heads over 2 key/value heads; `window`: every layer's causal window.
    rope = (_rope_scaled(10000.0, scaling) if scaling else _rope(10000.0))
    return transformers.MistralConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=60,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        head_dim=10, max_position_embeddings=300, rms_norm_eps=1e-6,
        sliding_window=window, tie_word_embeddings=False, **rope)


def _qwen2_sliding():
    # Qwen2 whose layers from the second on slide over 20 keys.
    config = _qwen2()
    return transformers.Qwen2Config(
        **{**config.to_dict(), "use_sliding_window": True,
           "sliding_window": 20, "max_window_layers": 1, "layer_types": None})


def _gemma3(bidirectional, scaling=None):
    # Gemma 3 text: heads of 12 over a width of 40 (4 query heads, 2
    # key/value heads), scores over sqrt(16) instead of sqrt(12), layers
    # sliding, sliding, full, sliding with a window of 8 and bases 1e4 /
    # 1e6; `scaling` on the full layers only. Bidirectional: EmbeddingGemma.
    if int(transformers.__version__.split(".")[0]) >= 5:
        full = {"rope_type": "default", "rope_theta": 1e6, **(scaling or {})}
        rope = {"rope_parameters": {
            "full_attention": full,
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    else:
        rope = {"rope_theta": 1e6, "rope_local_base_freq": 1e4,
                "rope_scaling": dict(scaling) if scaling else None}
    return transformers.Gemma3TextConfig(
        vocab_size=VOCAB, hidden_size=40, intermediate_size=52,
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        head_dim=12, query_pre_attn_scalar=16, sliding_window=8,
        layer_types=["sliding_attention", "sliding_attention",
                     "full_attention", "sliding_attention"],
        use_bidirectional_attention=bidirectional,
        max_position_embeddings=300, rms_norm_eps=1e-6,
        hidden_activation="gelu_pytorch_tanh", **rope)


def _deberta_v3():
    # DeBERTa-v3's layout: no absolute positions, log buckets (32 over
    # distances up to 299), shared position keys, a LayerNorm'd relative
    # table, both terms, no token types.
    return transformers.DebertaV2Config(
        vocab_size=VOCAB, hidden_size=48, num_hidden_layers=3,
        num_attention_heads=4, intermediate_size=70,
        max_position_embeddings=300, relative_attention=True,
        position_biased_input=False, pos_att_type=["p2c", "c2p"],
        position_buckets=32, max_relative_positions=-1,
        norm_rel_ebd="layer_norm", share_att_key=True, type_vocab_size=0,
        hidden_act="gelu", pad_token_id=0)


def _deberta_v2_absolute():
    # The other branches: an absolute table beside the relative terms,
    # pos_key_proj / pos_query_proj of its own per layer, distances
    # clamped at 40 without buckets, no norm on the table, the terms as a
    # string, token types.
    return transformers.DebertaV2Config(
        vocab_size=VOCAB, hidden_size=60, num_hidden_layers=3,
        num_attention_heads=5, intermediate_size=84,
        max_position_embeddings=300, relative_attention=True,
        position_biased_input=True, pos_att_type="c2p|p2c",
        position_buckets=-1, max_relative_positions=40, norm_rel_ebd="none",
        share_att_key=False, type_vocab_size=2, hidden_act="gelu",
        pad_token_id=0)


# Qwen3-Embedding's instruction prompt layout (its
# config_sentence_transformers.json): queries carry an instruction,
# documents nothing.
QWEN_PROMPTS = {
    "query": "Instruct: Given a question, retrieve passages that answer "
             "it\nQuery:",
    "document": "",
}


GEMMA_PROMPTS = {"query": "task: search result | query: ",
                 "document": "title: none | text: "}


def _embedding_gemma_files(path):
    """EmbeddingGemma's sentence-transformers modules, saved by the
    library: mean pooling, two bias-free Dense layers (4x wider, then
    back), Normalize, and its query / document prompts."""
    from sentence_transformers import SentenceTransformer, models
    transformer = models.Transformer(str(path), max_seq_length=300)
    dim = transformer.get_word_embedding_dimension()
    torch.manual_seed(77)
    dense = [models.Dense(dim, 4 * dim, bias=False,
                          activation_function=torch.nn.Identity()),
             models.Dense(4 * dim, dim, bias=False,
                          activation_function=torch.nn.Identity())]
    for layer in dense:  # std 0.02 would leave them near zero
        torch.nn.init.normal_(layer.linear.weight, std=0.5)
    st = SentenceTransformer(
        modules=[transformer, models.Pooling(dim, "mean"), *dense,
                 models.Normalize()],
        prompts=GEMMA_PROMPTS, device="cpu")
    st.save(str(path))


def _sentence_transformers_files(path, normalize, prompts=None):
    """modules.json with last-token pooling (and Normalize), as the Qwen3
    embedders ship them: without them sentence-transformers would mean-pool."""
    import json
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
        (path / "2_Normalize").mkdir(exist_ok=True)
    (path / "modules.json").write_text(json.dumps(modules, indent=2))
    (path / "1_Pooling").mkdir(exist_ok=True)
    hidden = json.loads((path / "config.json").read_text())["hidden_size"]
    (path / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": hidden,
        "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False,
        "pooling_mode_lasttoken": True, "include_prompt": True}))
    (path / "sentence_bert_config.json").write_text(json.dumps({
        "max_seq_length": 300, "do_lower_case": False}))
    if prompts:
        (path / "config_sentence_transformers.json").write_text(json.dumps({
            "prompts": prompts, "default_prompt_name": None,
            "similarity_fn_name": "cosine"}))


@torch.no_grad()
def _sharpen(model):
    """transformers initializes norm gains to 1, biases to 0 and weights
    at std 0.02, which leaves attention nearly uniform: gains and biases
    get noise and the query and key projections std 0.2, so that the q/k
    norms, the biases and the rotary codes all show in the outputs."""
    for name, p in model.named_parameters():
        if p.dim() == 1:
            p.add_(0.3 * torch.randn_like(p))
        elif name.endswith(("q_proj.weight", "k_proj.weight",
                            "query_proj.weight", "key_proj.weight",
                            "rel_embeddings.weight", "Wqkv.weight")):
            p.mul_(10.0)


# Causal embedders: sentence-transformers files (pooling, normalize,
# prompts) and the tokenizer's padding side, per entry.
CAUSAL = {
    "tf-qwen2": dict(normalize=False, prompts=None, padding_side="right"),
    "tf-qwen3": dict(normalize=True, prompts=QWEN_PROMPTS,
                     padding_side="left"),
    "tf-qwen3-lm-bf16": dict(normalize=True, prompts=None,
                             padding_side="left"),
    "tf-qwen3-yarn": dict(normalize=True, prompts=None, padding_side="left"),
    "tf-qwen2-linear": dict(normalize=False, prompts=None,
                            padding_side="right"),
    "tf-qwen3-llama3": dict(normalize=False, prompts=None,
                            padding_side="left"),
    "tf-qwen3-dynamic": dict(normalize=True, prompts=None,
                             padding_side="left"),
    "tf-qwen2-longrope": dict(normalize=False, prompts=None,
                              padding_side="right"),
    "tf-qwen2-sliding": dict(normalize=False, prompts=None,
                             padding_side="right"),
    "tf-llama-longrope": dict(normalize=True, prompts=None,
                              padding_side="left"),
    "tf-llama-llama3": dict(normalize=False, prompts=None,
                            padding_side="right"),
    "tf-llama-dynamic": dict(normalize=True, prompts=None,
                             padding_side="right"),
    "tf-mistral-sliding-yarn": dict(normalize=True, prompts=None,
                                    padding_side="left"),
    "tf-mistral-linear": dict(normalize=False, prompts=None,
                              padding_side="right"),
    "tf-gemma3-causal-linear": dict(normalize=True, prompts=None,
                                    padding_side="right"),
}
# Bidirectional embedders whose sentence-transformers files a function
# writes (after the tokenizer is saved).
ST_WRITERS = {"tf-embeddinggemma": _embedding_gemma_files}


# name -> (family the server reports, config, model class, tokenizer kind,
#          save: "float32" | "float16" | "bfloat16" | "sharded" | "bin")
FAMILIES = {
    "tf-bert": ("bert", _bert, transformers.BertModel, "wordpiece",
                "float32"),
    "tf-bert-mlm-f16": ("bert", _bert, transformers.BertForMaskedLM,
                        "wordpiece", "float16"),
    "tf-roberta": ("roberta", _roberta, transformers.RobertaModel, "bpe",
                   "float32"),
    "tf-roberta-mlm-bin": ("roberta", _roberta,
                           transformers.RobertaForMaskedLM, "bpe", "bin"),
    "tf-xlm-roberta-sharded": (
        "xlm-roberta", lambda: _roberta(transformers.XLMRobertaConfig),
        transformers.XLMRobertaForMaskedLM, "unigram", "sharded"),
    "tf-camembert": ("camembert",
                     lambda: _roberta(transformers.CamembertConfig),
                     transformers.CamembertModel, "bpe", "float32"),
    "tf-mpnet-mlm": ("mpnet", _mpnet, transformers.MPNetForMaskedLM,
                     "wordpiece", "float32"),
    "tf-distilbert": ("distilbert", _distilbert, transformers.DistilBertModel,
                      "wordpiece", "float32"),
    "tf-electra-disc": ("electra", _electra,
                        transformers.ElectraForPreTraining, "wordpiece",
                        "float32"),
    "tf-roformer": ("roformer", _roformer, transformers.RoFormerModel,
                    "wordpiece", "float32"),
    "tf-modernbert-bf16": ("modernbert", _modernbert,
                           transformers.ModernBertModel, "wordpiece",
                           "bfloat16"),
    "tf-modernbert-scaled": ("modernbert", _modernbert_scaled,
                             transformers.ModernBertModel, "wordpiece",
                             "float32"),
    "tf-t5-gated": ("t5", lambda: _t5(True), transformers.T5EncoderModel,
                    "unigram", "float32"),
    "tf-t5-tied": ("t5", lambda: _t5(False),
                   transformers.T5ForConditionalGeneration, "unigram",
                   "float32"),
    "tf-marian": ("marian", _marian, transformers.MarianMTModel, "unigram",
                  "float32"),
    "tf-deberta-v3": ("deberta-v2", _deberta_v3, transformers.DebertaV2Model,
                      "unigram", "float32"),
    "tf-deberta-v2-abs-mlm": ("deberta-v2", _deberta_v2_absolute,
                              transformers.DebertaV2ForMaskedLM, "wordpiece",
                              "float32"),
    "tf-qwen2": ("qwen2", _qwen2, transformers.Qwen2Model, "qwen",
                 "float32"),
    "tf-qwen3": ("qwen3", _qwen3, transformers.Qwen3Model, "qwen",
                 "float32"),
    "tf-qwen3-lm-bf16": ("qwen3", _qwen3, transformers.Qwen3ForCausalLM,
                         "qwen", "bfloat16"),
    # The length-independent rotary scalings.
    "tf-qwen3-yarn": ("qwen3", _qwen3_yarn, transformers.Qwen3Model, "qwen",
                      "float32"),
    "tf-qwen2-linear": ("qwen2", _qwen2_linear, transformers.Qwen2Model,
                        "qwen", "float32"),
    "tf-qwen3-llama3": ("qwen3", _qwen3_llama3, transformers.Qwen3Model,
                        "qwen", "float32"),
    # The scalings that depend on the sequence's length.
    "tf-qwen3-dynamic": ("qwen3", _qwen3_dynamic, transformers.Qwen3Model,
                         "qwen", "float32"),
    "tf-qwen2-longrope": ("qwen2", _qwen2_longrope, transformers.Qwen2Model,
                          "qwen", "float32"),
    # Sliding windows, Llama and Mistral, each under a rotary scaling.
    "tf-qwen2-sliding": ("qwen2", _qwen2_sliding, transformers.Qwen2Model,
                         "qwen", "float32"),
    "tf-llama-longrope": (
        "llama", lambda: _llama({
            "rope_type": "longrope", "short_factor": [1.0, 1.2, 1.5, 2.0],
            "long_factor": [1.0, 3.0, 8.0, 20.0]}, original=32),
        transformers.LlamaModel, "qwen", "float32"),
    "tf-llama-llama3": (
        "llama", lambda: _llama({
            "rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
            bias=False),
        transformers.LlamaForCausalLM, "qwen", "float32"),
    "tf-llama-dynamic": (
        "llama", lambda: _llama({"rope_type": "dynamic", "factor": 2.0},
                                bias=False),
        transformers.LlamaModel, "qwen", "float32"),
    "tf-mistral-sliding-yarn": (
        "mistral", lambda: _mistral({
            "rope_type": "yarn", "factor": 300 / 32,
            "original_max_position_embeddings": 32}, window=16),
        transformers.MistralModel, "qwen", "float32"),
    "tf-mistral-linear": (
        "mistral", lambda: _mistral({"rope_type": "linear", "factor": 3.0}),
        transformers.MistralForCausalLM, "qwen", "float32"),
    # Gemma 3: EmbeddingGemma's bidirectional layout with its modules, and
    # a causal one scaled (linear, on the full layers) as Gemma 3 4B is.
    "tf-embeddinggemma": ("gemma3_text", lambda: _gemma3(True),
                          transformers.Gemma3TextModel, "qwen", "float32"),
    "tf-gemma3-causal-linear": (
        "gemma3_text",
        lambda: _gemma3(False, {"rope_type": "linear", "factor": 8.0}),
        transformers.Gemma3ForCausalLM, "qwen", "float32"),
}


def build(out_dir, names=None):
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    built = []
    for i, (name, (family, make_config, cls, kind, save)) in enumerate(
            FAMILIES.items()):
        if names and name not in names and family not in names:
            continue
        tok = tokenizer(kind)
        config = sized_config(make_config, tok)
        torch.manual_seed(1000 + i)
        model = cls(config).eval()
        if name in CAUSAL or name in ST_WRITERS or family in (
                "deberta-v2", "modernbert"):
            _sharpen(model)
        path = out_dir / name
        kwargs = {"safe_serialization": True}
        if save in ("float16", "bfloat16"):
            model = model.to(getattr(torch, save))
        if save == "sharded":
            kwargs["max_shard_size"] = "100KB"
        model.save_pretrained(path, **kwargs)
        causal = CAUSAL.get(name)
        side = tok.padding_side
        if causal:
            tok.padding_side = causal["padding_side"]
        tok.save_pretrained(path)
        tok.padding_side = side
        if causal:
            _sentence_transformers_files(path, causal["normalize"],
                                         causal["prompts"])
        if name in ST_WRITERS:
            ST_WRITERS[name](path)
        if save == "bin":
            (path / "model.safetensors").unlink()
            torch.save(model.state_dict(), path / "pytorch_model.bin")
            subprocess.run([sys.executable, str(CONVERT), str(path)],
                           check=True, stdout=subprocess.DEVNULL)
        built.append((name, family, path))
    return built


if __name__ == "__main__":
    import sys
    for entry in build(sys.argv[1]):
        print(*entry)

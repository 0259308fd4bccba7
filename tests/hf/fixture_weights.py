"""Random weights under the real Hugging Face tensor names of each family.

Names follow the families' modeling code in transformers (modeling_bert,
modeling_roberta, modeling_xlm_roberta, modeling_roformer,
modeling_modernbert, modeling_t5, modeling_marian) and Jina's JinaBERT
implementation. Each builder takes the config.json dict and a seeded
torch.Generator and returns an ordered {name: float32 tensor}.
"""
import math

import torch


class Rand:
    """Deterministic random tensors of a scale that keeps a tiny random
    model's activations O(1) and its attention far from uniform."""

    def __init__(self, seed):
        self.gen = torch.Generator().manual_seed(seed)

    def normal(self, *shape, std=1.0):
        return torch.randn(*shape, generator=self.gen) * std

    def linear(self, out_dim, in_dim, gain=1.0):
        return self.normal(out_dim, in_dim, std=gain / math.sqrt(in_dim))

    def norm_weight(self, dim):
        return 1.0 + self.normal(dim, std=0.1)

    def bias(self, dim):
        return self.normal(dim, std=0.05)


def _dense(out, r, name, out_dim, in_dim, bias=True, gain=1.0):
    out[f"{name}.weight"] = r.linear(out_dim, in_dim, gain)
    if bias:
        out[f"{name}.bias"] = r.bias(out_dim)


def _layer_norm(out, r, name, dim, bias=True):
    out[f"{name}.weight"] = r.norm_weight(dim)
    if bias:
        out[f"{name}.bias"] = r.bias(dim)


def sinusoid_table(num_positions, dim):
    """The [sin | cos] table of RoFormerSinusoidalPositionalEmbedding and
    MarianSinusoidalPositionalEmbedding: angle(p, j) = p / 10000^(2 (j//2) /
    dim); columns [0, dim/2) hold sin of the even angles, the rest cos of the
    odd ones. Stored in float32, as those modules keep it."""
    pos = torch.arange(num_positions, dtype=torch.float64)[:, None]
    j = torch.arange(dim, dtype=torch.float64)[None, :]
    angle = pos / torch.pow(10000.0, 2 * torch.div(j, 2, rounding_mode="floor")
                            / dim)
    half = dim // 2 if dim % 2 == 0 else dim // 2 + 1
    table = torch.zeros(num_positions, dim, dtype=torch.float64)
    table[:, :half] = torch.sin(angle[:, 0::2])
    table[:, half:] = torch.cos(angle[:, 1::2])
    return table.float()


def bert_like(cfg, r, prefix, *, mlm_head=None, pooler=True,
              position_ids_buffer=False, rotary_table=False,
              gamma_beta=False):
    """BERT / RoBERTa / XLM-R / RoFormer / JinaBERT encoder tensors.

    prefix: "bert.", "roberta.", "roformer." or "" (as bge and jina ship).
    mlm_head: None, "bert" (cls.predictions + cls.seq_relationship) or
    "roberta" (lm_head.*). gamma_beta: LayerNorm weights named
    `LayerNorm.gamma` / `LayerNorm.beta`, as bert-base-uncased's
    model.safetensors still has them (transformers renames them on load)."""
    d, inter = cfg["hidden_size"], cfg["intermediate_size"]
    vocab, layers = cfg["vocab_size"], cfg["num_hidden_layers"]
    alibi = cfg.get("position_embedding_type") == "alibi"
    rotary = cfg["model_type"] == "roformer"
    out = {}
    emb = f"{prefix}embeddings"
    out[f"{emb}.word_embeddings.weight"] = r.normal(vocab, d, std=0.5)
    if not (alibi or rotary):
        out[f"{emb}.position_embeddings.weight"] = r.normal(
            cfg["max_position_embeddings"], d, std=0.5)
    out[f"{emb}.token_type_embeddings.weight"] = r.normal(
        cfg["type_vocab_size"], d, std=0.5)
    _layer_norm(out, r, f"{emb}.LayerNorm", d)
    if position_ids_buffer:
        out[f"{emb}.position_ids"] = torch.arange(
            cfg["max_position_embeddings"], dtype=torch.int64)[None, :]
    if rotary_table:
        head_dim = d // cfg["num_attention_heads"]
        out[f"{prefix}encoder.embed_positions.weight"] = sinusoid_table(
            cfg["max_position_embeddings"], head_dim)
    for i in range(layers):
        p = f"{prefix}encoder.layer.{i}"
        _dense(out, r, f"{p}.attention.self.query", d, d, gain=2.0)
        _dense(out, r, f"{p}.attention.self.key", d, d, gain=2.0)
        _dense(out, r, f"{p}.attention.self.value", d, d)
        _dense(out, r, f"{p}.attention.output.dense", d, d)
        _layer_norm(out, r, f"{p}.attention.output.LayerNorm", d)
        if cfg.get("feed_forward_type") in ("geglu", "reglu"):
            _dense(out, r, f"{p}.mlp.gated_layers", 2 * inter, d, bias=False)
            _dense(out, r, f"{p}.mlp.wo", d, inter)
            _layer_norm(out, r, f"{p}.mlp.layernorm", d)
        else:
            _dense(out, r, f"{p}.intermediate.dense", inter, d)
            _dense(out, r, f"{p}.output.dense", d, inter)
            _layer_norm(out, r, f"{p}.output.LayerNorm", d)
    if pooler:
        _dense(out, r, f"{prefix}pooler.dense", d, d)
    if mlm_head == "bert":
        out["cls.predictions.bias"] = r.bias(vocab)
        _dense(out, r, "cls.predictions.transform.dense", d, d)
        _layer_norm(out, r, "cls.predictions.transform.LayerNorm", d)
        out["cls.predictions.decoder.weight"] = out[
            f"{emb}.word_embeddings.weight"].clone()
        _dense(out, r, "cls.seq_relationship", 2, d)
    elif mlm_head == "roberta":
        _dense(out, r, "lm_head.dense", d, d)
        _layer_norm(out, r, "lm_head.layer_norm", d)
        out["lm_head.decoder.weight"] = out[
            f"{emb}.word_embeddings.weight"].clone()
        out["lm_head.bias"] = r.bias(vocab)
    if gamma_beta:
        out = {_old_layer_norm_name(k): v for k, v in out.items()}
    return out


def mpnet(cfg, r):
    """MPNetForMaskedLM: `mpnet.` prefix, attention.attn.{q,k,v,o}, one
    relative_attention_bias table in the encoder, lm_head; no token-type
    table."""
    d, inter = cfg["hidden_size"], cfg["intermediate_size"]
    vocab = cfg["vocab_size"]
    out = {}
    emb = "mpnet.embeddings"
    out[f"{emb}.word_embeddings.weight"] = r.normal(vocab, d, std=0.5)
    out[f"{emb}.position_embeddings.weight"] = r.normal(
        cfg["max_position_embeddings"], d, std=0.5)
    _layer_norm(out, r, f"{emb}.LayerNorm", d)
    for i in range(cfg["num_hidden_layers"]):
        p = f"mpnet.encoder.layer.{i}"
        _dense(out, r, f"{p}.attention.attn.q", d, d, gain=2.0)
        _dense(out, r, f"{p}.attention.attn.k", d, d, gain=2.0)
        _dense(out, r, f"{p}.attention.attn.v", d, d)
        _dense(out, r, f"{p}.attention.attn.o", d, d)
        _layer_norm(out, r, f"{p}.attention.LayerNorm", d)
        _dense(out, r, f"{p}.intermediate.dense", inter, d)
        _dense(out, r, f"{p}.output.dense", d, inter)
        _layer_norm(out, r, f"{p}.output.LayerNorm", d)
    out["mpnet.encoder.relative_attention_bias.weight"] = r.normal(
        cfg["relative_attention_num_buckets"], cfg["num_attention_heads"])
    _dense(out, r, "lm_head.dense", d, d)
    _layer_norm(out, r, "lm_head.layer_norm", d)
    out["lm_head.decoder.weight"] = out[f"{emb}.word_embeddings.weight"].clone()
    out["lm_head.bias"] = r.bias(vocab)
    return out


def _old_layer_norm_name(name):
    for new, old in ((".LayerNorm.weight", ".LayerNorm.gamma"),
                     (".LayerNorm.bias", ".LayerNorm.beta")):
        if name.endswith(new):
            return name[:-len(new)] + old
    return name


def modernbert(cfg, r):
    """ModernBertForMaskedLM: no biases (attention_bias, mlp_bias and
    norm_bias false), layer 0 has no attn_norm (nn.Identity)."""
    d, inter = cfg["hidden_size"], cfg["intermediate_size"]
    out = {"model.embeddings.tok_embeddings.weight": r.normal(
        cfg["vocab_size"], d, std=0.5)}
    _layer_norm(out, r, "model.embeddings.norm", d, bias=False)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}"
        if i > 0:
            _layer_norm(out, r, f"{p}.attn_norm", d, bias=False)
        _dense(out, r, f"{p}.attn.Wqkv", 3 * d, d, bias=False, gain=2.0)
        _dense(out, r, f"{p}.attn.Wo", d, d, bias=False)
        _layer_norm(out, r, f"{p}.mlp_norm", d, bias=False)
        _dense(out, r, f"{p}.mlp.Wi", 2 * inter, d, bias=False)
        _dense(out, r, f"{p}.mlp.Wo", d, inter, bias=False)
    _layer_norm(out, r, "model.final_norm", d, bias=False)
    _dense(out, r, "head.dense", d, d, bias=False)
    _layer_norm(out, r, "head.norm", d, bias=False)
    out["decoder.bias"] = r.bias(cfg["vocab_size"])
    return out


def _t5_attention(out, r, p, d, inner, bias_table=None):
    for name in ("q", "k", "v"):
        _dense(out, r, f"{p}.{name}", inner, d, bias=False,
               gain=1.5 if name != "v" else 1.0)
    _dense(out, r, f"{p}.o", d, inner, bias=False)
    if bias_table is not None:
        out[f"{p}.relative_attention_bias.weight"] = r.normal(
            *bias_table, std=1.0)


def _t5_ff(out, r, p, cfg):
    d, ff = cfg["d_model"], cfg["d_ff"]
    if cfg.get("feed_forward_proj", "relu").startswith("gated"):
        _dense(out, r, f"{p}.DenseReluDense.wi_0", ff, d, bias=False)
        _dense(out, r, f"{p}.DenseReluDense.wi_1", ff, d, bias=False)
    else:
        _dense(out, r, f"{p}.DenseReluDense.wi", ff, d, bias=False)
    _dense(out, r, f"{p}.DenseReluDense.wo", d, ff, bias=False)


def t5(cfg, r, *, decoder=True, lm_head=True, embed_tokens_copy=False):
    """T5ForConditionalGeneration (decoder, lm_head) or T5EncoderModel."""
    d, heads = cfg["d_model"], cfg["num_heads"]
    inner = heads * cfg["d_kv"]
    table = (cfg["relative_attention_num_buckets"], heads)
    out = {"shared.weight": r.normal(cfg["vocab_size"], d, std=1.0)}
    if embed_tokens_copy:
        out["encoder.embed_tokens.weight"] = out["shared.weight"].clone()
    for i in range(cfg["num_layers"]):
        p = f"encoder.block.{i}.layer"
        _t5_attention(out, r, f"{p}.0.SelfAttention", d, inner,
                      table if i == 0 else None)
        _layer_norm(out, r, f"{p}.0.layer_norm", d, bias=False)
        _t5_ff(out, r, f"{p}.1", cfg)
        _layer_norm(out, r, f"{p}.1.layer_norm", d, bias=False)
    _layer_norm(out, r, "encoder.final_layer_norm", d, bias=False)
    if decoder:
        for i in range(cfg.get("num_decoder_layers", cfg["num_layers"])):
            p = f"decoder.block.{i}.layer"
            _t5_attention(out, r, f"{p}.0.SelfAttention", d, inner,
                          table if i == 0 else None)
            _layer_norm(out, r, f"{p}.0.layer_norm", d, bias=False)
            _t5_attention(out, r, f"{p}.1.EncDecAttention", d, inner)
            _layer_norm(out, r, f"{p}.1.layer_norm", d, bias=False)
            _t5_ff(out, r, f"{p}.2", cfg)
            _layer_norm(out, r, f"{p}.2.layer_norm", d, bias=False)
        _layer_norm(out, r, "decoder.final_layer_norm", d, bias=False)
    if lm_head:
        out["lm_head.weight"] = r.linear(cfg["vocab_size"], d)
    return out


def _bart_attention(out, r, p, d):
    for name in ("k_proj", "v_proj", "q_proj"):
        _dense(out, r, f"{p}.{name}", d, d,
               gain=2.0 if name != "v_proj" else 1.0)
    _dense(out, r, f"{p}.out_proj", d, d)


def marian(cfg, r):
    """MarianMTModel: shared embeddings, stored sinusoidal tables, encoder,
    decoder, final_logits_bias and lm_head."""
    d, vocab = cfg["d_model"], cfg["vocab_size"]
    ffn = cfg["encoder_ffn_dim"]
    out = {"model.shared.weight": r.normal(vocab, d, std=0.2)}
    out["model.encoder.embed_tokens.weight"] = out["model.shared.weight"]
    out["model.encoder.embed_positions.weight"] = sinusoid_table(
        cfg["max_position_embeddings"], d)
    for i in range(cfg["encoder_layers"]):
        p = f"model.encoder.layers.{i}"
        _bart_attention(out, r, f"{p}.self_attn", d)
        _layer_norm(out, r, f"{p}.self_attn_layer_norm", d)
        _dense(out, r, f"{p}.fc1", ffn, d)
        _dense(out, r, f"{p}.fc2", d, ffn)
        _layer_norm(out, r, f"{p}.final_layer_norm", d)
    out["model.decoder.embed_tokens.weight"] = out["model.shared.weight"]
    out["model.decoder.embed_positions.weight"] = sinusoid_table(
        cfg["max_position_embeddings"], d)
    for i in range(cfg["decoder_layers"]):
        p = f"model.decoder.layers.{i}"
        _bart_attention(out, r, f"{p}.self_attn", d)
        _layer_norm(out, r, f"{p}.self_attn_layer_norm", d)
        _bart_attention(out, r, f"{p}.encoder_attn", d)
        _layer_norm(out, r, f"{p}.encoder_attn_layer_norm", d)
        _dense(out, r, f"{p}.fc1", cfg["decoder_ffn_dim"], d)
        _dense(out, r, f"{p}.fc2", d, cfg["decoder_ffn_dim"])
        _layer_norm(out, r, f"{p}.final_layer_norm", d)
    out["final_logits_bias"] = torch.zeros(1, vocab)
    out["lm_head.weight"] = out["model.shared.weight"]
    return {k: v.clone() for k, v in out.items()}

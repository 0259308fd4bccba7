"""The family forwards of hf_reference, one function per modeling file.

Each takes a Checkpoint and a 1-D tensor of token ids (one sequence, no
padding, token type 0) and returns (last_hidden_state [S, D], list of the
per-layer attention probabilities [H, S, S], list of the hidden states
[S, D]: the embedding output, then each layer's output, as the modeling
files collect them for output_hidden_states; the pre-norm families' last
entry is after their final norm, equal to last_hidden_state)."""
import math

import torch

from hf_reference import (DT, activation, alibi_slopes, attention, heads,
                          layer_norm, linear, rms_norm, roberta_position_ids,
                          rotary_angles, rotate_half, rotate_interleaved,
                          sinusoid, t5_bucket)

_PREFIXES = ("bert.", "roberta.", "roformer.", "")


def _prefix(w):
    for prefix in _PREFIXES:
        if f"{prefix}embeddings.word_embeddings.weight" in w:
            return prefix
    raise KeyError("no embeddings.word_embeddings.weight under a known prefix")


def _ln(x, w, name, eps):
    return layer_norm(x, w[f"{name}.weight"], w.get(f"{name}.bias"), eps)


def _bert_embeddings(c, w, p, ids):
    """BertEmbeddings / RobertaEmbeddings / RoFormerEmbeddings /
    JinaBertEmbeddings: words + token type 0 (+ learned positions), then
    LayerNorm."""
    e = f"{p}embeddings"
    x = w[f"{e}.word_embeddings.weight"][ids]
    x = x + w[f"{e}.token_type_embeddings.weight"][0]
    kind = c.get("position_embedding_type", "absolute")
    if c["model_type"] in ("roberta", "xlm-roberta"):
        positions = roberta_position_ids(ids, c["pad_token_id"])
        x = x + w[f"{e}.position_embeddings.weight"][positions]
    elif c["model_type"] == "bert" and kind == "absolute":
        x = x + w[f"{e}.position_embeddings.weight"][:len(ids)]
    return _ln(x, w, f"{e}.LayerNorm", c["layer_norm_eps"])


def bert_like(ckpt, ids):
    """BERT, RoBERTa, XLM-R (post-norm), RoFormer (interleaved rotary on q
    and k, positions from 0) and JinaBERT (symmetric ALiBi added to the
    scaled scores, GeGLU feed-forward)."""
    c, w = ckpt.config, ckpt.w
    p = _prefix(w)
    n, eps = c["num_attention_heads"], c["layer_norm_eps"]
    d = c["hidden_size"] // n
    act = activation(c["hidden_act"])
    x = _bert_embeddings(c, w, p, ids)
    s = len(ids)
    positions = torch.arange(s)
    bias = None
    if c.get("position_embedding_type") == "alibi":
        slopes = torch.tensor(alibi_slopes(n), dtype=DT)
        distance = (positions[None, :] - positions[:, None]).abs().to(DT)
        bias = -slopes[:, None, None] * distance[None]
    probs_all, states = [], [x]
    for i in range(c["num_hidden_layers"]):
        layer = f"{p}encoder.layer.{i}"
        q = heads(linear(x, w, f"{layer}.attention.self.query"), n)
        k = heads(linear(x, w, f"{layer}.attention.self.key"), n)
        v = heads(linear(x, w, f"{layer}.attention.self.value"), n)
        if c["model_type"] == "roformer":
            angles = rotary_angles(positions, d, 10000.0)
            q, k = rotate_interleaved(q, angles), rotate_interleaved(k, angles)
            if c.get("rotary_value"):
                v = rotate_interleaved(v, angles)
        ctx, probs = attention(q, k, v, 1.0 / math.sqrt(d), bias)
        probs_all.append(probs)
        a = _ln(linear(ctx, w, f"{layer}.attention.output.dense") + x, w,
                f"{layer}.attention.output.LayerNorm", eps)
        if f"{layer}.mlp.gated_layers.weight" in w:
            h = a @ w[f"{layer}.mlp.gated_layers.weight"].T
            inter = c["intermediate_size"]
            gate_act = torch.relu if c.get("feed_forward_type") == "reglu" \
                else activation("gelu")
            f = linear(gate_act(h[:, :inter]) * h[:, inter:], w,
                       f"{layer}.mlp.wo")
            x = _ln(f + a, w, f"{layer}.mlp.layernorm", eps)
        else:
            f = linear(act(linear(a, w, f"{layer}.intermediate.dense")), w,
                       f"{layer}.output.dense")
            x = _ln(f + a, w, f"{layer}.output.LayerNorm", eps)
        states.append(x)
    return x, probs_all, states


def mpnet(ckpt, ids):
    """MPNet: words + learned positions numbered as RoBERTa does, LayerNorm;
    post-norm layers whose scaled scores get one relative bias over T5
    buckets (bidirectional, max distance 128) of plain sequence indices,
    shared by every layer."""
    c, w = ckpt.config, ckpt.w
    n, eps = c["num_attention_heads"], c["layer_norm_eps"]
    d = c["hidden_size"] // n
    act = activation(c["hidden_act"])
    e = "mpnet.embeddings"
    x = w[f"{e}.word_embeddings.weight"][ids] + w[
        f"{e}.position_embeddings.weight"][
        roberta_position_ids(ids, c["pad_token_id"])]
    x = _ln(x, w, f"{e}.LayerNorm", eps)
    s = torch.arange(len(ids))
    buckets = t5_bucket(s[None, :] - s[:, None],
                        c["relative_attention_num_buckets"], 128)
    bias = w["mpnet.encoder.relative_attention_bias.weight"][buckets].permute(
        2, 0, 1)  # [H, S, S]
    probs_all, states = [], [x]
    for i in range(c["num_hidden_layers"]):
        layer = f"mpnet.encoder.layer.{i}"
        q = heads(linear(x, w, f"{layer}.attention.attn.q"), n)
        k = heads(linear(x, w, f"{layer}.attention.attn.k"), n)
        v = heads(linear(x, w, f"{layer}.attention.attn.v"), n)
        ctx, probs = attention(q, k, v, 1.0 / math.sqrt(d), bias)
        probs_all.append(probs)
        a = _ln(linear(ctx, w, f"{layer}.attention.attn.o") + x, w,
                f"{layer}.attention.LayerNorm", eps)
        f = linear(act(linear(a, w, f"{layer}.intermediate.dense")), w,
                   f"{layer}.output.dense")
        x = _ln(f + a, w, f"{layer}.output.LayerNorm", eps)
        states.append(x)
    return x, probs_all, states


def modernbert(ckpt, ids):
    """Pre-norm, no biases, layer 0 without attn_norm, half-rotation rotary
    with global theta on every global_attn_every_n_layers-th layer (from 0)
    and local theta plus a |i - j| <= local_attention // 2 window on the
    others, GeGLU (act on the first half), final norm."""
    c, w = ckpt.config, ckpt.w
    n, eps = c["num_attention_heads"], c["norm_eps"]
    d = c["hidden_size"] // n
    act = activation(c["hidden_activation"])
    s = len(ids)
    positions = torch.arange(s)
    distance = (positions[None, :] - positions[:, None]).abs()
    window = torch.zeros(s, s, dtype=DT)
    window[distance > c["local_attention"] // 2] = -math.inf
    x = _ln(w["model.embeddings.tok_embeddings.weight"][ids], w,
            "model.embeddings.norm", eps)
    probs_all, states = [], [x]
    for i in range(c["num_hidden_layers"]):
        layer = f"model.layers.{i}"
        is_global = i % c["global_attn_every_n_layers"] == 0
        h = x if i == 0 else _ln(x, w, f"{layer}.attn_norm", eps)
        qkv = (h @ w[f"{layer}.attn.Wqkv.weight"].T).reshape(s, 3, n, d)
        q, k, v = (qkv[:, j].transpose(0, 1) for j in range(3))
        theta = c["global_rope_theta"] if is_global else c["local_rope_theta"]
        angles = rotary_angles(positions, d, theta)
        q, k = rotate_half(q, angles), rotate_half(k, angles)
        ctx, probs = attention(q, k, v, d ** -0.5,
                               None if is_global else window)
        probs_all.append(probs)
        x = x + ctx @ w[f"{layer}.attn.Wo.weight"].T
        m = _ln(x, w, f"{layer}.mlp_norm", eps) @ w[f"{layer}.mlp.Wi.weight"].T
        inp, gate = m.chunk(2, -1)
        x = x + (act(inp) * gate) @ w[f"{layer}.mlp.Wo.weight"].T
        states.append(x)
    x = _ln(x, w, "model.final_norm", eps)
    states[-1] = x
    return x, probs_all, states


def t5_encoder(ckpt, ids):
    """T5Stack (encoder): RMSNorm pre-norm, no biases, no 1/sqrt(d) scale,
    one relative bias table (block 0) shared by all layers, relu or gated
    feed-forward, final RMSNorm."""
    c, w = ckpt.config, ckpt.w
    n, eps = c["num_heads"], c["layer_norm_epsilon"]
    proj = c.get("feed_forward_proj", "relu")
    gated = proj.split("-")[0] == "gated"
    act = activation("gelu_new" if proj == "gated-gelu"
                     else proj.split("-")[-1])
    s = len(ids)
    positions = torch.arange(s)
    relative = positions[None, :] - positions[:, None]  # key - query
    buckets = t5_bucket(relative, c["relative_attention_num_buckets"],
                        c.get("relative_attention_max_distance", 128))
    table = w["encoder.block.0.layer.0.SelfAttention.relative_attention_bias"
              ".weight"]
    bias = table[buckets].permute(2, 0, 1)  # [H, S, S]
    x = w["shared.weight"][ids]
    probs_all, states = [], [x]
    for i in range(c["num_layers"]):
        b = f"encoder.block.{i}.layer"
        h = rms_norm(x, w[f"{b}.0.layer_norm.weight"], eps)
        att = f"{b}.0.SelfAttention"
        q, k, v = (heads(h @ w[f"{att}.{m}.weight"].T, n) for m in "qkv")
        ctx, probs = attention(q, k, v, 1.0, bias)
        probs_all.append(probs)
        x = x + ctx @ w[f"{att}.o.weight"].T
        h = rms_norm(x, w[f"{b}.1.layer_norm.weight"], eps)
        ff = f"{b}.1.DenseReluDense"
        if gated:
            h = act(h @ w[f"{ff}.wi_0.weight"].T) * (h @ w[f"{ff}.wi_1.weight"].T)
        else:
            h = act(h @ w[f"{ff}.wi.weight"].T)
        x = x + h @ w[f"{ff}.wo.weight"].T
        states.append(x)
    x = rms_norm(x, w["encoder.final_layer_norm.weight"], eps)
    states[-1] = x
    return x, probs_all, states


def marian_encoder(ckpt, ids):
    """MarianEncoder: embeddings scaled by sqrt(d_model), plus the fixed
    [sin | cos] table at positions from 0, post-norm BART layers with q
    scaled by head_dim^-0.5, no final layer norm."""
    c, w = ckpt.config, ckpt.w
    dm, n = c["d_model"], c["encoder_attention_heads"]
    act = activation(c["activation_function"])
    scale = math.sqrt(dm) if c.get("scale_embedding") else 1.0
    s = len(ids)
    x = w["model.shared.weight"][ids] * scale + sinusoid(torch.arange(s), dm)
    probs_all, states = [], [x]
    for i in range(c["encoder_layers"]):
        layer = f"model.encoder.layers.{i}"
        q, k, v = (heads(linear(x, w, f"{layer}.self_attn.{m}_proj"), n)
                   for m in "qkv")
        ctx, probs = attention(q, k, v, (dm // n) ** -0.5)
        probs_all.append(probs)
        x = layer_norm(x + linear(ctx, w, f"{layer}.self_attn.out_proj"),
                       w[f"{layer}.self_attn_layer_norm.weight"],
                       w[f"{layer}.self_attn_layer_norm.bias"], 1e-5)
        f = linear(act(linear(x, w, f"{layer}.fc1")), w, f"{layer}.fc2")
        x = layer_norm(x + f, w[f"{layer}.final_layer_norm.weight"],
                       w[f"{layer}.final_layer_norm.bias"], 1e-5)
        states.append(x)
    return x, probs_all, states

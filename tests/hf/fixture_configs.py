"""config.json of each fixture: the key set of a real checkpoint's config
(named per function) with tiny sizes. Values other than sizes are the real
model's unless a test needs otherwise (said where so)."""


def bert_base_uncased():
    """bert-base-uncased (BertForMaskedLM)."""
    return {
        "architectures": ["BertForMaskedLM"],
        "attention_probs_dropout_prob": 0.1,
        "gradient_checkpointing": False,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 32,
        "initializer_range": 0.02,
        "intermediate_size": 64,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": 64,
        "model_type": "bert",
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "transformers_version": "4.6.0.dev0",
        "type_vocab_size": 2,
        "use_cache": True,
        "vocab_size": 120,
    }


def bge_small():
    """BAAI/bge-small-en-v1.5 (BertModel)."""
    return {
        "_name_or_path": "/root/.cache/torch/sentence_transformers/BAAI_bge-small-en/",
        "architectures": ["BertModel"],
        "attention_probs_dropout_prob": 0.1,
        "classifier_dropout": None,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 48,
        "id2label": {"0": "LABEL_0"},
        "initializer_range": 0.02,
        "intermediate_size": 96,
        "label2id": {"LABEL_0": 0},
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": 64,
        "model_type": "bert",
        "num_attention_heads": 4,
        "num_hidden_layers": 3,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "torch_dtype": "float32",
        "transformers_version": "4.30.0",
        "type_vocab_size": 2,
        "use_cache": True,
        "vocab_size": 130,
    }


def all_minilm_l6():
    """sentence-transformers/all-MiniLM-L6-v2 (BertModel)."""
    return {
        "_name_or_path": "nreimers/MiniLM-L6-H384-uncased",
        "architectures": ["BertModel"],
        "attention_probs_dropout_prob": 0.1,
        "gradient_checkpointing": False,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 32,
        "initializer_range": 0.02,
        "intermediate_size": 64,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": 64,
        "model_type": "bert",
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "pad_token_id": 0,
        "position_embedding_type": "absolute",
        "transformers_version": "4.8.2",
        "type_vocab_size": 2,
        "use_cache": True,
        "vocab_size": 110,
    }


def roberta_base():
    """FacebookAI/roberta-base (RobertaForMaskedLM)."""
    return {
        "architectures": ["RobertaForMaskedLM"],
        "attention_probs_dropout_prob": 0.1,
        "bos_token_id": 0,
        "eos_token_id": 2,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 32,
        "initializer_range": 0.02,
        "intermediate_size": 64,
        "layer_norm_eps": 1e-05,
        "max_position_embeddings": 66,
        "model_type": "roberta",
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "pad_token_id": 1,
        "type_vocab_size": 1,
        "vocab_size": 140,
    }


def all_mpnet_base_v2():
    """sentence-transformers/all-mpnet-base-v2 (MPNet; learned positions
    numbered from pad_token_id + 1, relative buckets on the logits)."""
    return {
        "architectures": ["MPNetForMaskedLM"],
        "attention_probs_dropout_prob": 0.1,
        "bos_token_id": 0,
        "eos_token_id": 2,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 32,
        "initializer_range": 0.02,
        "intermediate_size": 64,
        "layer_norm_eps": 1e-05,
        "max_position_embeddings": 66,
        "model_type": "mpnet",
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "pad_token_id": 1,
        "relative_attention_num_buckets": 32,
        "vocab_size": 140,
    }


def xlm_roberta_base():
    """FacebookAI/xlm-roberta-base (XLMRobertaForMaskedLM)."""
    return {
        "architectures": ["XLMRobertaForMaskedLM"],
        "attention_probs_dropout_prob": 0.1,
        "bos_token_id": 0,
        "eos_token_id": 2,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 48,
        "initializer_range": 0.02,
        "intermediate_size": 96,
        "layer_norm_eps": 1e-05,
        "max_position_embeddings": 66,
        "model_type": "xlm-roberta",
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "output_past": True,
        "pad_token_id": 1,
        "type_vocab_size": 1,
        "vocab_size": 150,
    }


def roformer_chinese_base():
    """junnyu/roformer_chinese_base (RoFormerForMaskedLM)."""
    return {
        "architectures": ["RoFormerForMaskedLM"],
        "attention_probs_dropout_prob": 0.1,
        "embedding_size": 32,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 32,
        "initializer_range": 0.02,
        "intermediate_size": 64,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": 128,
        "model_type": "roformer",
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "pad_token_id": 0,
        "rotary_value": False,
        "type_vocab_size": 2,
        "use_cache": True,
        "vocab_size": 120,
    }


def modernbert_base():
    """answerdotai/ModernBERT-base (ModernBertForMaskedLM). local_attention
    is 8 (a window of 4 tokens each side) and global_attn_every_n_layers 2,
    so layer 1 of 3 is a sliding-window layer at test lengths."""
    return {
        "architectures": ["ModernBertForMaskedLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 100,
        "classifier_activation": "gelu",
        "classifier_bias": False,
        "classifier_dropout": 0.0,
        "classifier_pooling": "mean",
        "cls_token_id": 100,
        "decoder_bias": True,
        "deterministic_flash_attn": False,
        "embedding_dropout": 0.0,
        "eos_token_id": 101,
        "global_attn_every_n_layers": 2,
        "global_rope_theta": 160000.0,
        "gradient_checkpointing": False,
        "hidden_activation": "gelu",
        "hidden_size": 32,
        "initializer_cutoff_factor": 2.0,
        "initializer_range": 0.02,
        "intermediate_size": 48,
        "layer_norm_eps": 1e-05,
        "local_attention": 8,
        "local_rope_theta": 10000.0,
        "max_position_embeddings": 8192,
        "mlp_bias": False,
        "mlp_dropout": 0.0,
        "model_type": "modernbert",
        "norm_bias": False,
        "norm_eps": 1e-05,
        "num_attention_heads": 4,
        "num_hidden_layers": 3,
        "pad_token_id": 102,
        "position_embedding_type": "absolute",
        "sep_token_id": 101,
        "sparse_pred_ignore_index": -100,
        "sparse_prediction": False,
        "torch_dtype": "float32",
        "transformers_version": "4.47.0.dev0",
        "vocab_size": 128,
    }


def jina_v2_small():
    """jinaai/jina-embeddings-v2-small-en (JinaBertForMaskedLM, remote
    code)."""
    base = "jinaai/jina-bert-implementation--"
    return {
        "_name_or_path": "jinaai/jina-bert-implementation",
        "architectures": ["JinaBertForMaskedLM"],
        "attention_probs_dropout_prob": 0.0,
        "attn_implementation": None,
        "auto_map": {
            "AutoConfig": base + "configuration_bert.JinaBertConfig",
            "AutoModel": base + "modeling_bert.JinaBertModel",
            "AutoModelForMaskedLM": base + "modeling_bert.JinaBertForMaskedLM",
            "AutoModelForSequenceClassification":
                base + "modeling_bert.JinaBertForSequenceClassification",
        },
        "classifier_dropout": None,
        "emb_pooler": "mean",
        "feed_forward_type": "geglu",
        "gradient_checkpointing": False,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 48,
        "initializer_range": 0.02,
        "intermediate_size": 64,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": 8192,
        "model_max_length": 8192,
        "model_type": "bert",
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "pad_token_id": 0,
        "position_embedding_type": "alibi",
        "torch_dtype": "float16",
        "transformers_version": "4.26.0",
        "type_vocab_size": 2,
        "use_cache": True,
        "vocab_size": 120,
    }


def t5_small():
    """t5-small (T5ForConditionalGeneration, relu feed-forward). Buckets
    16 and max distance 20 (real: 32, 128) so test lengths reach the
    logarithmic buckets and the clamp."""
    return {
        "architectures": ["T5ForConditionalGeneration"],
        "d_ff": 64,
        "d_kv": 12,
        "d_model": 32,
        "decoder_start_token_id": 0,
        "dropout_rate": 0.1,
        "eos_token_id": 1,
        "initializer_factor": 1.0,
        "is_encoder_decoder": True,
        "layer_norm_epsilon": 1e-06,
        "model_type": "t5",
        "n_positions": 512,
        "num_heads": 4,
        "num_layers": 2,
        "output_past": True,
        "pad_token_id": 0,
        "relative_attention_max_distance": 20,
        "relative_attention_num_buckets": 16,
        "vocab_size": 100,
    }


def t5_v1_1_small():
    """google/t5-v1_1-small (gated-gelu, untied lm_head, no
    relative_attention_max_distance key: the default 128 applies)."""
    return {
        "architectures": ["T5ForConditionalGeneration"],
        "d_ff": 48,
        "d_kv": 8,
        "d_model": 40,
        "decoder_start_token_id": 0,
        "dropout_rate": 0.1,
        "eos_token_id": 1,
        "feed_forward_proj": "gated-gelu",
        "initializer_factor": 1.0,
        "is_encoder_decoder": True,
        "layer_norm_epsilon": 1e-06,
        "model_type": "t5",
        "num_decoder_layers": 1,
        "num_heads": 4,
        "num_layers": 2,
        "output_past": True,
        "pad_token_id": 0,
        "relative_attention_num_buckets": 32,
        "tie_word_embeddings": False,
        "vocab_size": 100,
    }


def gtr_t5_base():
    """sentence-transformers/gtr-t5-base (T5EncoderModel)."""
    return {
        "_name_or_path": "models/gtr-t5-base",
        "architectures": ["T5EncoderModel"],
        "d_ff": 64,
        "d_kv": 8,
        "d_model": 32,
        "decoder_start_token_id": 0,
        "dropout_rate": 0.1,
        "eos_token_id": 1,
        "feed_forward_proj": "relu",
        "gradient_checkpointing": False,
        "initializer_factor": 1.0,
        "is_encoder_decoder": True,
        "layer_norm_epsilon": 1e-06,
        "model_type": "t5",
        "n_positions": 512,
        "num_decoder_layers": 2,
        "num_heads": 4,
        "num_layers": 2,
        "output_past": True,
        "pad_token_id": 0,
        "relative_attention_max_distance": 128,
        "relative_attention_num_buckets": 32,
        "torch_dtype": "float32",
        "transformers_version": "4.11.3",
        "use_cache": True,
        "vocab_size": 100,
    }


def opus_mt_en_de():
    """Helsinki-NLP/opus-mt-en-de (MarianMTModel, swish activation)."""
    return {
        "_name_or_path": "/tmp/Helsinki-NLP/opus-mt-en-de",
        "activation_dropout": 0.0,
        "activation_function": "swish",
        "add_bias_logits": False,
        "add_final_layer_norm": False,
        "architectures": ["MarianMTModel"],
        "attention_dropout": 0.0,
        "bad_words_ids": [[119]],
        "bos_token_id": 0,
        "classif_dropout": 0.0,
        "classifier_dropout": 0.0,
        "d_model": 32,
        "decoder_attention_heads": 4,
        "decoder_ffn_dim": 64,
        "decoder_layerdrop": 0.0,
        "decoder_layers": 1,
        "decoder_start_token_id": 119,
        "decoder_vocab_size": 120,
        "dropout": 0.1,
        "encoder_attention_heads": 4,
        "encoder_ffn_dim": 64,
        "encoder_layerdrop": 0.0,
        "encoder_layers": 2,
        "eos_token_id": 0,
        "extra_pos_embeddings": 120,
        "forced_eos_token_id": 0,
        "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"},
        "init_std": 0.02,
        "is_encoder_decoder": True,
        "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
        "max_length": 512,
        "max_position_embeddings": 512,
        "model_type": "marian",
        "normalize_before": False,
        "normalize_embedding": False,
        "num_beams": 4,
        "num_hidden_layers": 2,
        "pad_token_id": 119,
        "scale_embedding": True,
        "share_encoder_decoder_embeddings": True,
        "static_position_embeddings": True,
        "transformers_version": "4.22.0.dev0",
        "use_cache": True,
        "vocab_size": 120,
    }

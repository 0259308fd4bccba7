"""Broken checkpoints must stop encoder-server at start: a non-zero exit
within a minute, no ready file, and an error that names the problem.

Each case copies a good fixture and breaks one thing: an unknown
model_type, a missing tensor, a tensor of the wrong shape, an unexpected
tensor, a config whose width is not a multiple of its head count, sizes
beyond any real model (2^40 layers; 5000 layers), a missing shard, a
classification head whose id2label does not match its outputs or whose
classifier does not fit the model's width, a sentence-transformers
SpladePooling module on a checkpoint without a masked-LM head or with a
pooling it does not define.
"""
import json
import os
import subprocess

import torch

import make_fixtures
import safetensors_io

TIMEOUT_S = 60


def _fixture(name):
    return next(f for f in make_fixtures.FIXTURES if f.name == name)


def _rewrite(directory, change):
    """Applies change(tensors) to model.safetensors in place."""
    path = os.path.join(directory, "model.safetensors")
    tensors = safetensors_io.read_file(path)
    change(tensors)
    safetensors_io.write_file(path, tensors)


def _unknown_model_type(directory):
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["model_type"] = "gpt-encoder-x"
    with open(path, "w") as f:
        json.dump(config, f)
    # The message names the bad value and lists the supported ones.
    return ["gpt-encoder-x", "bert", "t5"]


def _missing_tensor(directory):
    name = "encoder.layer.1.attention.self.key.weight"
    _rewrite(directory, lambda t: t.pop(name))
    return [name]


def _wrong_shape(directory):
    name = "encoder.layer.0.intermediate.dense.weight"

    def change(tensors):
        rows = tensors[name].shape[0]
        tensors[name] = torch.zeros(rows, 40)
    _rewrite(directory, change)
    return [name, "40"]


def _unexpected_tensor(directory):
    # bge has 3 layers: a fourth layer's tensor belongs to no slot.
    name = "encoder.layer.3.output.dense.weight"

    def change(tensors):
        tensors[name] = torch.zeros(48, 96)
    _rewrite(directory, change)
    return [name]


def _inconsistent_config(directory):
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["num_attention_heads"] = 5  # hidden_size 48 is not a multiple
    with open(path, "w") as f:
        json.dump(config, f)
    # The file and both numbers (key names vary: hidden_size or d_model).
    return ["config.json", "48", "5"]


def _absurd_sizes(directory):
    """Sizes that would have the importer allocate without end."""
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["num_hidden_layers"] = 1 << 40
    with open(path, "w") as f:
        json.dump(config, f)
    return ["num_hidden_layers", str(1 << 40), str(1 << 24)]


def _too_many_layers(directory):
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["num_hidden_layers"] = 5000
    with open(path, "w") as f:
        json.dump(config, f)
    return ["5000", "1024"]


def _add_head(directory, classifier_shape, labels):
    """A BERT classification head (pooler and classifier) and labels."""
    def change(tensors):
        tensors["pooler.dense.weight"] = torch.zeros(48, 48)
        tensors["pooler.dense.bias"] = torch.zeros(48)
        tensors["classifier.weight"] = torch.zeros(*classifier_shape)
        tensors["classifier.bias"] = torch.zeros(classifier_shape[0])
    _rewrite(directory, change)
    path = os.path.join(directory, "config.json")
    with open(path) as f:
        config = json.load(f)
    config["id2label"] = {str(i): f"L{i}" for i in range(labels)}
    with open(path, "w") as f:
        json.dump(config, f)


def _head_labels_mismatch(directory):
    _add_head(directory, (2, 48), 3)
    return ["id2label", "3 labels", "2 outputs"]


def _head_wrong_width(directory):
    _add_head(directory, (1, 40), 1)
    return ["classifier.weight", "[1, 40]", "48"]


def _declare_splade(directory, pooling):
    """sentence-transformers' SparseEncoder files: MLMTransformer and
    SpladePooling."""
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.sparse_encoder.modules."
                        "mlm_transformer.MLMTransformer"},
               {"idx": 1, "name": "1", "path": "1_SpladePooling",
                "type": "sentence_transformers.sparse_encoder.modules."
                        "splade_pooling.SpladePooling"}]
    with open(os.path.join(directory, "modules.json"), "w") as f:
        json.dump(modules, f)
    os.makedirs(os.path.join(directory, "1_SpladePooling"), exist_ok=True)
    with open(os.path.join(directory, "1_SpladePooling", "config.json"),
              "w") as f:
        json.dump({"pooling_strategy": pooling,
                   "activation_function": "relu"}, f)


def _splade_without_head(directory):
    _declare_splade(directory, "max")
    return ["SpladePooling", "masked-LM head"]


def _splade_bad_pooling(directory):
    _declare_splade(directory, "mean")
    return ["pooling_strategy", "mean"]


def _missing_shard(directory):
    shard = "model-00002-of-00002.safetensors"
    os.remove(os.path.join(directory, shard))
    return [shard]


CASES = [("unknown model_type", "bge", _unknown_model_type),
         ("missing tensor", "bge", _missing_tensor),
         ("wrong shape", "bge", _wrong_shape),
         ("unexpected tensor", "bge", _unexpected_tensor),
         ("inconsistent config", "bge", _inconsistent_config),
         ("absurd sizes", "bge", _absurd_sizes),
         ("too many layers", "bge", _too_many_layers),
         ("head labels mismatch", "bge", _head_labels_mismatch),
         ("head wrong width", "bge", _head_wrong_width),
         ("splade without head", "bge", _splade_without_head),
         ("splade bad pooling", "bert-mlm", _splade_bad_pooling),
         ("missing shard", "bert-mlm", _missing_shard)]


def check_case(binary, root, label, fixture_name, breaker):
    """Returns a failure message, or None when the server refused well."""
    directory = make_fixtures.write_fixture(
        os.path.join(root, label.replace(" ", "-")), _fixture(fixture_name))
    needles = breaker(directory)
    ready = os.path.join(root, label.replace(" ", "-") + ".ready")
    try:
        result = subprocess.run(
            [binary, "--listen=127.0.0.1:0", f"--ready-file={ready}",
             f"--model-dir={directory}"],
            capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"{label}: server still running after {TIMEOUT_S} s"
    output = result.stdout + result.stderr
    if result.returncode == 0 or os.path.exists(ready):
        return f"{label}: server started (exit {result.returncode})"
    missing = [n for n in needles if n not in output]
    if missing:
        return (f"{label}: error does not name {missing}:\n"
                f"{output.strip()[-600:]}")
    print(f"  {label}: exit {result.returncode}: "
          f"{output.strip().splitlines()[-1][:200]}")
    return None


def check_all(binary, root):
    """Failure messages of every case (empty when all pass)."""
    print("broken checkpoints:")
    failures = []
    for label, fixture_name, breaker in CASES:
        failure = check_case(binary, root, label, fixture_name, breaker)
        if failure:
            failures.append(failure)
    return failures

#!/usr/bin/env python3
"""A small Python serving peer: what a user would write instead of
encoder-server, to compare against.

grpcio + PyTorch eager (the project's .venv), the project's own
encoder.v1 proto, and a dynamic batcher of its own: one worker thread takes
the first waiting sequence, gathers more for up to --max-delay-ms or until
--max-batch sequences, pads them to the longest, runs one forward pass with a
key padding mask, mean-pools each sequence over its real tokens and answers
every caller. It serves ListModels (name, vocabulary and shape, so
encoder-client bench can drive it) and Embed with token-id inputs and mean
pooling; anything else is UNIMPLEMENTED.

The model is eager_bench.py's: nn.Embedding plus sinusoidal positions plus
nn.TransformerEncoder (post-norm, ReLU), loaded from the safetensors file
that eager_bench.py / peer_bench.py write, so encoder-server can serve the
same weights from a repository.

Usage: peer_server.py --weights W.safetensors --layers N [--port 0]
         [--threads 1] [--max-batch 32] [--max-delay-ms 0] [--ready-file F]
Prints nothing; writes {"grpc_port": P} to --ready-file once serving.
"""
import argparse
import json
import os
import pathlib
import queue
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc
import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "client" / "python" /
                        "examples"))
import minimal_client as encoder_client  # noqa: E402
from eager_bench import EagerModel, sinusoidal  # noqa: E402

MODEL_NAME = "peer"
VOCAB = 10000
WIDTH = 512


def read_safetensors(path):
    """Tensors of a float32 safetensors file (the format's header + data)."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        data = f.read()
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            raise ValueError("%s: only F32 is read, got %s" %
                             (name, entry["dtype"]))
        begin, end = entry["data_offsets"]
        flat = torch.frombuffer(bytearray(data[begin:end]),
                                dtype=torch.float32)
        tensors[name] = flat.reshape(entry["shape"])
    return tensors


class _Pending:
    __slots__ = ("ids", "done", "pooled", "error", "batch_size")

    def __init__(self, ids):
        self.ids = ids
        self.batch_size = 0
        self.done = threading.Event()
        self.pooled = None
        self.error = None


class Batcher:
    """One worker thread; sequences from every caller share its batches."""

    def __init__(self, model, max_batch, max_delay_s, max_length):
        self.model = model
        self.max_batch = max_batch
        self.max_delay_s = max_delay_s
        self.pe = sinusoidal(max_length, WIDTH).float()
        self.queue = queue.Queue()
        threading.Thread(target=self._loop, daemon=True).start()

    def embed(self, sequences):
        items = [_Pending(ids) for ids in sequences]
        for item in items:
            self.queue.put(item)
        for item in items:
            item.done.wait()
            if item.error is not None:
                raise item.error
        return [(item.pooled, item.batch_size) for item in items]

    def _loop(self):
        while True:
            batch = [self.queue.get()]
            end = None
            while len(batch) < self.max_batch:
                try:
                    if self.max_delay_s <= 0:
                        batch.append(self.queue.get_nowait())
                        continue
                    if end is None:
                        end = time.monotonic() + self.max_delay_s
                    left = end - time.monotonic()
                    if left <= 0:
                        break
                    batch.append(self.queue.get(timeout=left))
                except queue.Empty:
                    break
            try:
                pooled = self._run(batch)
                for item, row in zip(batch, pooled):
                    item.pooled = row
                    item.batch_size = len(batch)
            except Exception as e:  # every caller of the batch hears it
                for item in batch:
                    item.error = e
            for item in batch:
                item.done.set()

    def _run(self, batch):
        longest = max(len(item.ids) for item in batch)
        ids = torch.zeros(len(batch), longest, dtype=torch.long)
        pad = torch.ones(len(batch), longest, dtype=torch.bool)
        for i, item in enumerate(batch):
            ids[i, :len(item.ids)] = torch.tensor(item.ids, dtype=torch.long)
            pad[i, :len(item.ids)] = False
        with torch.inference_mode():
            x = self.model.embedding(ids) + self.pe[:longest]
            h = self.model.encoder(x, src_key_padding_mask=pad)
            real = (~pad).unsqueeze(-1).float()
            pooled = (h * real).sum(1) / real.sum(1)
        return [row.numpy().tobytes() for row in pooled]


def make_handlers(pb2, batcher, layers, max_length):
    def list_models(request, context):
        info = pb2.ModelInfo(name=MODEL_NAME, is_default=True, d_model=WIDTH,
                             num_heads=8, num_layers=layers, d_ff=2048,
                             vocab_size=VOCAB, pooling="mean",
                             max_input_tokens=max_length,
                             dtype=pb2.DTYPE_FLOAT32, pooled_dim=WIDTH,
                             precision="float32")
        return pb2.ListModelsResponse(models=[info], default_model=MODEL_NAME)

    def embed(request, context):
        if request.model not in ("", MODEL_NAME):
            context.abort(grpc.StatusCode.NOT_FOUND,
                          "model '%s' is not served" % request.model)
        sequences = []
        for i, item in enumerate(request.inputs):
            if item.WhichOneof("content") != "token_ids":
                context.abort(grpc.StatusCode.UNIMPLEMENTED,
                              "inputs[%d]: only token ids" % i)
            ids = list(item.token_ids.ids)
            if not 0 < len(ids) <= max_length or not all(
                    0 <= t < VOCAB for t in ids):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                              "inputs[%d]: bad length or id" % i)
            sequences.append(ids)
        if not sequences:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no inputs")
        pooled = batcher.embed(sequences)
        response = pb2.EmbedResponse(model=MODEL_NAME,
                                     request_id=request.request_id)
        for ids, (data, batch_size) in zip(sequences, pooled):
            result = response.results.add(num_tokens=len(ids))
            result.batch.batch_size = batch_size
            result.pooled.shape.append(WIDTH)
            result.pooled.dtype = pb2.DTYPE_FLOAT32
            result.pooled.data = data
        return response

    rpc = grpc.unary_unary_rpc_method_handler
    return grpc.method_handlers_generic_handler(
        "encoder.v1.EncoderService", {
            "ListModels": rpc(
                list_models,
                request_deserializer=pb2.ListModelsRequest.FromString,
                response_serializer=pb2.ListModelsResponse.SerializeToString),
            "Embed": rpc(
                embed,
                request_deserializer=pb2.EmbedRequest.FromString,
                response_serializer=pb2.EmbedResponse.SerializeToString),
        })


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--weights", required=True)
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (encoder-server's default "
                        "is 1)")
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--max-delay-ms", type=float, default=0)
    p.add_argument("--max-length", type=int, default=2048)
    p.add_argument("--rpc-threads", type=int, default=64)
    p.add_argument("--ready-file")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    model = EagerModel(a.layers).eval()
    model.load_state_dict(read_safetensors(a.weights))
    batcher = Batcher(model, a.max_batch, a.max_delay_ms / 1000.0,
                      a.max_length)
    with tempfile.TemporaryDirectory(prefix="peer-stubs-") as tmp:
        pb2, _ = encoder_client.load_stubs(tmp)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=a.rpc_threads),
                         options=[("grpc.max_receive_message_length",
                                   64 << 20)])
    server.add_generic_rpc_handlers(
        (make_handlers(pb2, batcher, a.layers, a.max_length),))
    port = server.add_insecure_port("127.0.0.1:%d" % a.port)
    server.start()
    if a.ready_file:
        tmp_file = a.ready_file + ".tmp"
        with open(tmp_file, "w") as f:
            json.dump({"grpc_port": port}, f)
        os.rename(tmp_file, a.ready_file)
    try:
        server.wait_for_termination()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The HTTP API's OpenAPI document (server/http/openapi.json) against the
OpenAPI 3.1 specification and against a live encoder-server.

Checks, without a server:
- the document is valid OpenAPI 3.1 (openapi-spec-validator), at version
  3.1.0, titled encoder-server, with info.version "0.0.0" (the server
  writes its own in) and the Apache-2.0 license; no OpenAPI 3.0 keyword
  (`nullable`) is left;
- every operation has a unique operationId, one declared tag, a summary
  and a description; every request body has at least one example; every
  example, request or response, validates against its schema (JSON Schema
  2020-12, the document's $refs resolved);
- the documentation routes are documented: GET /openapi.json and GET
  /api-doc/openapi.json as application/json, GET /docs as text/html, all
  without a token.

Checks against encoder-server, started with a --models repository of four
tiny random-weight BERT checkpoints written here with transformers (an
embedding model with prompts, a reranker with one label, a classifier
with three, a SPLADE model with a masked-LM head; one WordPiece
tokenizer), a bearer token file, --max-inputs-per-request=8 and
--http-max-body-bytes=65536:
- GET /openapi.json is the committed document but for info.version, which
  is the version CMakeLists.txt declares (read here independently), and
  GET /api-doc/openapi.json is the same document;
- every request example of every operation is answered 200, with a
  documented media type, a body that validates against the documented
  schema, and the response headers the document marks required (each
  documented header that is present validates); every GET operation
  likewise (path parameters from their examples), and with an unknown
  model in its path parameter answers a documented error whose body
  validates;
- for every POST operation, bodies made wrong from its first example (each
  required field removed, each field given a value of a type its schema
  refuses) are refused with a documented 4xx whose body validates against
  that status's schema; hand-written bad bodies (not JSON, empty lists, an
  unknown model, a task the model lacks, too many inputs, a long input with
  truncation off, a body over the limit, an id outside the vocabulary)
  likewise, with the status each should get;
- every operation that needs the bearer token answers 401 without it
  (documented, with WWW-Authenticate), and those whose security allows no
  token (probes, /metrics, the documentation) answer without one;
- every documented path and method is served (not the server's "no route"
  404, not 405), every method a documented path does not list (GET, POST,
  PUT, DELETE, PATCH) is 405 with an Allow header naming exactly the
  documented ones (and HEAD beside GET), and undocumented paths (GET
  /nowhere, POST /embeddings, GET /v1, GET /docs/nothing) are the "no
  route" 404; these errors validate against the OpenAI-style error schema.

Runs on the project's Python environment (.venv: jsonschema, referencing,
openapi-spec-validator, torch, transformers, tokenizers).

Usage: openapi_test.py --server BIN [--document FILE] [--cmake-lists FILE]
       [unittest arguments]
"""
import argparse
import copy
import http.client
import json
import os
import re
import sys
import tempfile
import unittest
import urllib.parse

import jsonschema
import referencing
import referencing.jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from server_process import ServerProcess  # noqa: E402

ARGS = None
TOKEN = "openapi-test-token-7d2a"
DOC_URI = "urn:encoder-server:openapi"
METHODS = ["get", "put", "post", "delete", "options", "head", "patch",
           "trace"]
MAX_INPUTS = 8
MAX_BODY = 65536

# The models the document's examples name, served here under those names.
EMBED = "bge-small-en-v1.5"
RERANK = "bge-reranker-base"
CLASSIFY = "roberta-sentiment"
SPARSE = "splade-v3"
LABELS = ["negative", "neutral", "positive"]
VOCAB_SIZE = 8000


def load_document():
    with open(ARGS.document) as f:
        return json.load(f)


def project_version():
    """The version CMakeLists.txt's project() declares."""
    with open(ARGS.cmake_lists) as f:
        return re.search(r"project\(\w+ [^)]*VERSION ([0-9.]+)",
                         f.read()).group(1)


def pointer(*parts):
    """A JSON pointer of `parts`."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1")
                   for p in parts)


class Document:
    """The document, its $refs, and validation of values against the schema
    at a JSON pointer."""

    def __init__(self, doc):
        self.doc = doc
        resource = referencing.Resource.from_contents(
            doc, default_specification=referencing.jsonschema.DRAFT202012)
        self.registry = referencing.Registry().with_resource(DOC_URI,
                                                             resource)

    def at(self, ptr):
        node = self.doc
        for part in ptr.split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            node = node[int(part) if isinstance(node, list) else part]
        return node

    def resolve(self, ptr):
        """(pointer, object) of the object at `ptr`, its $ref followed (for
        the Reference Objects of responses, parameters, headers and request
        bodies)."""
        node = self.at(ptr)
        while isinstance(node, dict) and "$ref" in node:
            ptr = node["$ref"][1:]
            node = self.at(ptr)
        return ptr, node

    def errors(self, schema_ptr, value):
        """The validation errors of `value` against the schema at
        `schema_ptr` (a list of messages; empty when valid)."""
        ref = DOC_URI + "#" + urllib.parse.quote(schema_ptr, safe="/~")
        validator = jsonschema.Draft202012Validator({"$ref": ref},
                                                    registry=self.registry)
        return [f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: "
                f"{e.message}" for e in validator.iter_errors(value)]

    def valid(self, schema_ptr, value):
        return not self.errors(schema_ptr, value)

    def operations(self):
        """(path, method, operation pointer, operation) of each
        operation."""
        for path, item in self.doc["paths"].items():
            for method in METHODS:
                if method in item:
                    yield (path, method, pointer("paths", path, method),
                           item[method])

    def security(self, operation):
        return operation.get("security", self.doc.get("security", []))

    def needs_token(self, operation):
        """Whether the operation's security has no way without a token."""
        security = self.security(operation)
        return bool(security) and {} not in security

    def request_examples(self, op_ptr):
        """[(name, value)] of the operation's JSON request examples, and
        the pointer of the request body's schema."""
        if "requestBody" not in self.at(op_ptr):
            return [], None
        body_ptr, body = self.resolve(op_ptr + "/requestBody")
        media = body["content"]["application/json"]
        out = []
        if "example" in media:
            out.append(("example", media["example"]))
        for name in media.get("examples", {}):
            _, e = self.resolve(body_ptr + pointer(
                "content", "application/json", "examples", name))
            out.append((name, e["value"]))
        return out, body_ptr + pointer("content", "application/json",
                                       "schema")


def walk(node, path=()):
    """Every (path, dict) in `node`."""
    if isinstance(node, dict):
        yield path, node
        for k, v in node.items():
            yield from walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, path + (i,))


class DocumentTest(unittest.TestCase):
    """The document alone."""

    @classmethod
    def setUpClass(cls):
        cls.d = Document(load_document())
        cls.doc = cls.d.doc

    def test_valid_openapi_3_1(self):
        from openapi_spec_validator import OpenAPIV31SpecValidator, validate
        validate(self.doc, cls=OpenAPIV31SpecValidator)
        self.assertEqual(self.doc["openapi"], "3.1.0")
        info = self.doc["info"]
        self.assertEqual(info["title"], "encoder-server")
        self.assertEqual(info["version"], "0.0.0")
        self.assertEqual(info["license"]["identifier"], "Apache-2.0")
        nullable = [p for p, node in walk(self.doc) if "nullable" in node
                    and p[-1:] != ("properties",)]
        self.assertEqual(nullable, [], "OpenAPI 3.0's nullable: use "
                                       "type [X, \"null\"]")

    def test_operations_are_complete(self):
        tags = {t["name"] for t in self.doc["tags"]}
        ids = []
        for path, method, ptr, op in self.d.operations():
            with self.subTest(operation=f"{method.upper()} {path}"):
                ids.append(op.get("operationId"))
                self.assertTrue(op.get("operationId"))
                self.assertEqual(len(op.get("tags", [])), 1)
                self.assertIn(op["tags"][0], tags)
                self.assertTrue(op.get("summary"))
                self.assertTrue(op.get("description"))
                self.assertIn("200", op["responses"])
                examples, _ = self.d.request_examples(ptr)
                if method == "post":
                    self.assertGreater(len(examples), 0,
                                       "a request body without an example")
        self.assertEqual(len(ids), len(set(ids)), "operationIds repeat")

    def test_examples_validate(self):
        count = 0
        for path, method, ptr, op in self.d.operations():
            examples, schema_ptr = self.d.request_examples(ptr)
            for name, value in examples:
                count += 1
                with self.subTest(request=f"{method.upper()} {path} {name}"):
                    self.assertEqual(self.d.errors(schema_ptr, value), [])
            for status in op["responses"]:
                r_ptr, r = self.d.resolve(ptr + pointer("responses", status))
                for media, content in r.get("content", {}).items():
                    values = ([content["example"]] if "example" in content
                              else [])
                    values += [e["value"] for e in
                               content.get("examples", {}).values()]
                    for value in values:
                        count += 1
                        with self.subTest(response=f"{method.upper()} {path}"
                                                   f" {status} {media}"):
                            self.assertEqual(self.d.errors(
                                r_ptr + pointer("content", media, "schema"),
                                value), [])
        self.assertGreater(count, 30)

    def test_documentation_routes_are_documented(self):
        for path, media in [("/openapi.json", "application/json"),
                            ("/api-doc/openapi.json", "application/json"),
                            ("/docs", "text/html")]:
            with self.subTest(path=path):
                op = self.doc["paths"][path]["get"]
                self.assertEqual(list(op["responses"]["200"]["content"]),
                                 [media])
                self.assertEqual(op["security"], [])


def build_models(directory):
    """Writes the four checkpoints under `directory`; returns the
    repository entries."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers
    from tokenizers import (Tokenizer, decoders, models, normalizers,
                            pre_tokenizers, processors)
    # BERT's uncased ids where the examples use them ([CLS] hello world
    # [SEP] is 101 7592 2088 102), the examples' words, and single
    # characters so that any text tokenizes.
    vocab = [f"[unused{i}]" for i in range(VOCAB_SIZE)]
    for i, token in [(0, "[PAD]"), (100, "[UNK]"), (101, "[CLS]"),
                     (102, "[SEP]"), (103, "[MASK]"), (2088, "world"),
                     (7592, "hello")]:
        vocab[i] = token
    words = ("what is deep learning the capital of germany berlin france "
             "paris a cat sat on mat good night first second text food was "
             "delicious waiter friendly how do rainbows form i like you "
             "this movie great terrible kind machine document about "
             "history long").split()
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789.,?!'-:")
    free = iter(range(1000, VOCAB_SIZE))
    for token in sorted(set(words)) + chars + ["##" + c for c in chars]:
        if token not in vocab:
            vocab[next(free)] = token
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)},
                                     unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 101), ("[SEP]", 102)])
    transformers.utils.logging.disable_progress_bar()
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
        cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")

    def config(**extra):
        return transformers.BertConfig(
            vocab_size=VOCAB_SIZE, hidden_size=64, num_hidden_layers=1,
            num_attention_heads=4, intermediate_size=96,
            max_position_embeddings=64, **extra)

    torch.manual_seed(11)
    built = [
        (EMBED, transformers.BertModel(config())),
        (RERANK, transformers.BertForSequenceClassification(
            config(num_labels=1))),
        (CLASSIFY, transformers.BertForSequenceClassification(
            config(num_labels=len(LABELS), id2label=dict(enumerate(LABELS)),
                   label2id={label: i for i, label in enumerate(LABELS)}))),
        (SPARSE, transformers.BertForMaskedLM(config())),
    ]
    entries = []
    for name, model in built:
        path = os.path.join(directory, name)
        model.eval().save_pretrained(path, safe_serialization=True)
        fast.save_pretrained(path)
        entries.append({"name": name, "path": path})
    entries[0]["prompts"] = {"query": "query: ", "passage": "passage: "}
    return entries


class Reply:
    def __init__(self, status, headers, data):
        self.status = status
        self.headers = headers  # lower-case name -> value
        self.data = data
        self.media = headers.get("content-type", "").split(";")[0].strip()

    def json(self):
        return json.loads(self.data)

    def __repr__(self):
        return f"{self.status} {self.media} {self.data[:300]!r}"


class LiveTest(unittest.TestCase):
    """The document against a running server."""

    @classmethod
    def setUpClass(cls):
        cls.d = Document(load_document())
        cls.tmp = tempfile.TemporaryDirectory(prefix="encoder-openapi-")
        repo = os.path.join(cls.tmp.name, "repo.json")
        with open(repo, "w") as f:
            json.dump({"default_model": EMBED,
                       "models": build_models(cls.tmp.name)}, f)
        tokens = os.path.join(cls.tmp.name, "tokens")
        with open(tokens, "w") as f:
            f.write(TOKEN + "\n")
        cls.server = ServerProcess(ARGS.server, directory=cls.tmp.name,
                                   extra_args=[
            f"--models={repo}", "--no-warm-up", "--http-listen=127.0.0.1:0",
            f"--auth-token-file={tokens}",
            f"--max-inputs-per-request={MAX_INPUTS}",
            f"--http-max-body-bytes={MAX_BODY}"])
        try:
            cls.server.wait_ready(120)
            with open(cls.server.ready_file) as f:
                cls.port = json.load(f)["http_port"]
        except Exception:
            cls.server.stop()
            cls.tmp.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.tmp.cleanup()

    def request(self, method, path, body=None, raw=None, token=True):
        """One request on a new connection."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            headers = {}
            if token:
                headers["Authorization"] = f"Bearer {TOKEN}"
            data = raw if raw is not None else (
                None if body is None else json.dumps(body).encode())
            if data is not None:
                headers["Content-Type"] = "application/json"
            conn.request(method.upper(), path, body=data, headers=headers)
            r = conn.getresponse()
            return Reply(r.status, {k.lower(): v for k, v in r.getheaders()},
                         r.read())
        finally:
            conn.close()

    def call(self, op, method, path, body=None, raw=None, token=None):
        """A request with the token the operation's security asks for."""
        if token is None:
            token = self.d.needs_token(op)
        return self.request(method, path, body=body, raw=raw, token=token)

    def check_response(self, op_ptr, reply, statuses=None):
        """The reply's status is documented (explicitly, not as default;
        within `statuses` when given), its media type is documented and its
        body and headers validate."""
        responses = self.d.at(op_ptr)["responses"]
        status = str(reply.status)
        self.assertIn(status, responses,
                      f"undocumented status: {reply!r}")
        if statuses is not None:
            self.assertIn(reply.status, statuses, repr(reply))
        r_ptr, r = self.d.resolve(op_ptr + pointer("responses", status))
        content = r.get("content", {})
        self.assertIn(reply.media, content,
                      f"undocumented media type: {reply!r}")
        schema_ptr = r_ptr + pointer("content", reply.media, "schema")
        value = (reply.json() if reply.media == "application/json"
                 else reply.data.decode())
        errors = self.d.errors(schema_ptr, value)
        self.assertEqual(errors, [], f"{reply.status} body {reply!r}")
        for name in r.get("headers", {}):
            h_ptr, h = self.d.resolve(r_ptr + pointer("headers", name))
            got = reply.headers.get(name.lower())
            if got is None:
                self.assertFalse(h.get("required", False),
                                 f"header {name} missing: {reply!r}")
                continue
            if h["schema"].get("type") == "integer":
                self.assertRegex(got, r"^-?[0-9]+$", name)
                got = int(got)
            self.assertEqual(self.d.errors(h_ptr + "/schema", got), [],
                             f"header {name}: {got!r}")

    def concrete(self, path, op_ptr, value=None):
        """`path` with each parameter filled with `value` or its example."""
        op = self.d.at(op_ptr)
        for i in range(len(op.get("parameters", []))):
            _, p = self.d.resolve(op_ptr + pointer("parameters", i))
            if p["in"] == "path":
                v = value if value is not None else p["example"]
                path = path.replace("{" + p["name"] + "}",
                                    urllib.parse.quote(v, safe=""))
        return path

    def first_request(self, path, method, ptr):
        """(concrete path, body) of the operation's first example."""
        examples, _ = self.d.request_examples(ptr)
        return (self.concrete(path, ptr),
                examples[0][1] if examples else None)

    def wrong_bodies(self, schema_ptr, example, candidates):
        """[(name, object)]: `example` without each field its schema (an
        object schema at `schema_ptr`) requires, and with each field set
        to the first of `candidates` the field's schema refuses."""
        schema = self.d.at(schema_ptr)
        out = []
        for field in schema.get("required", []):
            bad = dict(example)
            bad.pop(field, None)
            out.append((f"without {field}", bad))
        for field in schema["properties"]:
            field_ptr = schema_ptr + pointer("properties", field)
            wrong = [v for v in candidates if not self.d.valid(field_ptr, v)]
            if wrong:
                out.append((f"{field}={json.dumps(wrong[0])}",
                            {**example, field: wrong[0]}))
        return out

    # ----------------------------------------------------------- the tests
    def test_served_document_is_the_committed_one(self):
        served = self.request("GET", "/openapi.json", token=False)
        self.assertEqual((served.status, served.media),
                         (200, "application/json"), repr(served))
        document = served.json()
        self.assertEqual(document["info"]["version"], project_version())
        committed = copy.deepcopy(self.d.doc)
        committed["info"]["version"] = document["info"]["version"]
        self.assertTrue(document == committed,
                        "GET /openapi.json differs from "
                        "server/http/openapi.json (rebuild the server?)")
        tei = self.request("GET", "/api-doc/openapi.json", token=False)
        self.assertEqual((tei.status, tei.media), (200, "application/json"))
        self.assertTrue(tei.json() == document,
                        "/api-doc/openapi.json is not /openapi.json")

    def test_request_examples_succeed(self):
        sent = 0
        for path, method, ptr, op in self.d.operations():
            examples, _ = self.d.request_examples(ptr)
            for name, value in examples:
                with self.subTest(example=f"{method.upper()} {path} {name}"):
                    reply = self.call(op, method, self.concrete(path, ptr),
                                      body=value)
                    self.check_response(ptr, reply, statuses=[200])
                    sent += 1
        self.assertGreater(sent, 20)

    def test_get_operations(self):
        for path, method, ptr, op in self.d.operations():
            if method != "get":
                continue
            with self.subTest(operation=f"GET {path}"):
                reply = self.call(op, "get", self.concrete(path, ptr))
                self.check_response(ptr, reply, statuses=[200])
            if "{" in path:
                with self.subTest(operation=f"GET {path}, unknown model"):
                    reply = self.call(
                        op, "get", self.concrete(path, ptr, "no-such-model"))
                    self.check_response(ptr, reply, statuses=[404])

    def test_wrong_bodies_from_the_schema_are_refused(self):
        """Each required field removed, each field of a type its schema
        refuses: the schema and the server agree that the body is bad."""
        candidates = [12345, "not-a-valid-choice", True, {"k": 1}, [1.5],
                      [[True]]]
        tried = 0
        for path, method, ptr, op in self.d.operations():
            examples, schema_ptr = self.d.request_examples(ptr)
            if not examples:
                continue
            schema_ptr, schema = self.d.resolve(schema_ptr)
            if "properties" not in schema:
                continue  # anyOf bodies (POST /): the hand-written cases
            bodies = self.wrong_bodies(schema_ptr, examples[0][1],
                                       candidates)
            # One level down: an object field of the first example that
            # has one (long_input, hidden_states, inputs, parameters).
            for field in schema["properties"]:
                f_ptr, f_schema = self.d.resolve(
                    schema_ptr + pointer("properties", field))
                if "properties" not in f_schema:
                    continue
                having = [v for _, v in examples
                          if isinstance(v.get(field), dict)]
                if not having:
                    continue
                for name, nested in self.wrong_bodies(
                        f_ptr, having[0][field], candidates):
                    bodies.append((f"{field}: {name}",
                                   {**having[0], field: nested}))
            for name, bad in bodies:
                with self.subTest(body=f"{method.upper()} {path} {name}"):
                    self.assertFalse(self.d.valid(schema_ptr, bad))
                    reply = self.call(op, method, self.concrete(path, ptr),
                                      body=bad)
                    self.check_response(ptr, reply,
                                        statuses=range(400, 500))
                    tried += 1
        self.assertGreater(tried, 50)

    def test_bad_bodies_get_their_documented_errors(self):
        long_text = "hello world " * 60  # over the models' 64 tokens
        cases = {
            "/v1/embeddings": [
                ({"model": EMBED}, 400),
                ({"input": []}, 400),
                ({"input": "x", "model": "no-such-model"}, 404),
                ({"input": ["x"] * (MAX_INPUTS + 1)}, 400),
                ({"input": long_text, "truncate": False}, 400),
                ({"input": "x", "dimensions": 100000}, 400),
                ({"input": "x", "prompt_name": "no-such-prompt"}, 400),
                (b"{not json", 400),
                ({"input": "x" * MAX_BODY}, 413),
            ],
            "/v1/rerank": [
                ({"model": RERANK, "documents": ["a"]}, 400),
                ({"model": RERANK, "query": "q", "documents": []}, 400),
                ({"model": EMBED, "query": "q", "documents": ["a"]}, 400),
                ({"model": "no-such-model", "query": "q",
                  "documents": ["a"]}, 404),
            ],
            "/embed": [
                ({"inputs": []}, 400),
                ({"inputs": 5}, 422),
                ({"inputs": "x", "model": "no-such-model"}, 422),
                ({"inputs": "x", "truncation_direction": "Up"}, 422),
                ({"inputs": ["x"] * (MAX_INPUTS + 1)}, 413),
                ({"inputs": long_text, "truncate": False}, 413),
                (b"[1, 2", 422),
                ({"inputs": "x" * MAX_BODY}, 413),
            ],
            "/embed_all": [({"inputs": "x", "truncate": "yes"}, 422),
                           ({"inputs": []}, 400)],
            "/embed_sparse": [({}, 422),
                              ({"inputs": "no sparse head"}, 424)],
            "/rerank": [
                ({"model": RERANK, "query": "q"}, 422),
                ({"model": RERANK, "query": "q", "texts": []}, 400),
                ({"model": RERANK, "query": "", "texts": ["a"]}, 413),
                ({"model": EMBED, "query": "q", "texts": ["a"]}, 424),
            ],
            "/predict": [({"model": CLASSIFY, "inputs": 3}, 422),
                         ({"model": CLASSIFY, "inputs": []}, 400),
                         ({"model": CLASSIFY, "inputs": [["a", 1]]}, 422),
                         ({"inputs": "no classification head"}, 424)],
            "/similarity": [
                ({"inputs": {"source_sentence": "a"}}, 422),
                ({"inputs": {"source_sentence": "a", "sentences": []}},
                 400),
            ],
            "/": [({"inputs": 5}, 422),
                  ({"model": RERANK, "query": "q"}, 422),
                  ({"model": CLASSIFY, "inputs": []}, 400)],
            "/tokenize": [({"inputs": [1, 2]}, 422),
                          ({"inputs": []}, 400),
                          ({"inputs": "x", "prompt_name": "nope"}, 413)],
            "/decode": [({"ids": "x"}, 422), ({"ids": []}, 400),
                        ({"ids": [VOCAB_SIZE + 5]}, 413),
                        ({"ids": [1], "model": "no-such-model"}, 422)],
        }
        posts = {path for path, method, _, _ in self.d.operations()
                 if method == "post"}
        self.assertEqual(posts - set(cases), set(),
                         "POST routes without a bad body here")
        for path, bodies in cases.items():
            ptr = pointer("paths", path, "post")
            op = self.d.at(ptr)
            for body, status in bodies:
                name = body if isinstance(body, bytes) else json.dumps(body)
                with self.subTest(body=f"POST {path} {name[:80]}"):
                    if isinstance(body, bytes):
                        reply = self.call(op, "post", path, raw=body)
                    else:
                        reply = self.call(op, "post", path, body=body)
                    self.check_response(ptr, reply, statuses=[status])

    def test_token_is_required_where_documented(self):
        checked = 0
        for path, method, ptr, op in self.d.operations():
            concrete, body = self.first_request(path, method, ptr)
            with self.subTest(operation=f"{method.upper()} {path}"):
                reply = self.request(method, concrete, body=body,
                                     token=False)
                if self.d.needs_token(op):
                    self.check_response(ptr, reply, statuses=[401])
                    self.assertEqual(reply.headers.get("www-authenticate"),
                                     "Bearer")
                    checked += 1
                else:
                    self.check_response(ptr, reply, statuses=[200])
        self.assertGreater(checked, 10)

    def test_documented_routes_are_served_and_others_refused(self):
        error_ptr = pointer("components", "schemas", "OpenAiError")
        for path, item in self.d.doc["paths"].items():
            documented = [m for m in METHODS if m in item]
            ptr = pointer("paths", path, documented[0])
            concrete = self.concrete(path, ptr)
            for method in documented:
                op_ptr = pointer("paths", path, method)
                _, body = self.first_request(path, method, op_ptr)
                with self.subTest(route=f"{method.upper()} {path}"):
                    reply = self.call(item[method], method, concrete,
                                      body=body)
                    self.assertNotIn(reply.status, (404, 405), repr(reply))
            allow = {m.upper() for m in documented}
            if "GET" in allow:
                allow.add("HEAD")
            for method in ["get", "post", "put", "delete", "patch"]:
                if method in documented:
                    continue
                with self.subTest(route=f"{method.upper()} {path}"):
                    reply = self.request(method, concrete, body={})
                    self.assertEqual(reply.status, 405, repr(reply))
                    self.assertEqual(
                        {m.strip() for m in
                         reply.headers.get("allow", "").split(",")}, allow)
                    if path != "/metrics":  # plain text there
                        self.assertEqual(
                            self.d.errors(error_ptr, reply.json()), [])
        for method, path in [("GET", "/nowhere"), ("POST", "/embeddings"),
                             ("GET", "/v1"), ("GET", "/docs/nothing")]:
            with self.subTest(route=f"{method} {path} (undocumented)"):
                self.assertNotIn(path, self.d.doc["paths"])
                reply = self.request(method, path,
                                     body={} if method == "POST" else None)
                self.assertEqual(reply.status, 404, repr(reply))
                self.assertEqual(self.d.errors(error_ptr, reply.json()), [])
                self.assertTrue(reply.json()["error"]["message"].startswith(
                    "no route "), repr(reply))


def main():
    global ARGS
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True,
                        help="the encoder-server executable")
    parser.add_argument("--document",
                        default=os.path.join(ROOT, "server", "http",
                                             "openapi.json"),
                        help="the committed document (default: "
                             "server/http/openapi.json)")
    parser.add_argument("--cmake-lists",
                        default=os.path.join(ROOT, "CMakeLists.txt"),
                        help="where the project's version is declared")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()

"""The text-embeddings-inference routes against TEI's own OpenAPI schema.

tei_openapi.json is docs/openapi.json of huggingface/text-embeddings-inference
(version 1.9.3 of its router; Apache License 2.0), kept as published. Each
call below sends a body that must validate against the route's request
schema (so it is a request TEI itself takes) and checks the answer's
status against the route's documented statuses and its body against that
status's schema (OpenAPI 3.0's `nullable` read as JSON Schema's null
type), with jsonschema's Draft 2020-12 validator. Routes: /embed,
/embed_all, /embed_sparse, /rerank, /predict, /similarity, /tokenize,
/decode, /v1/embeddings and GET /info, with successes and refusals (no
documents to rerank, a model lacking the task, a body that does not
parse, an input too long with truncate false; by default it is cut). An
empty `inputs` list is no TEI request (it matches both branches of the
schema's oneOf), so it is not sent here.
"""
import copy
import json
import pathlib
import urllib.error
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent


def _as_json_schema(node):
    """OpenAPI 3.0 -> JSON Schema: {"nullable": true, "type": t} accepts
    null too."""
    if isinstance(node, list):
        return [_as_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _as_json_schema(v) for k, v in node.items()}
    if out.pop("nullable", False):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        else:
            out = {"anyOf": [out, {"type": "null"}]}
    return out


class Spec:
    def __init__(self):
        import jsonschema
        self.doc = json.loads((HERE / "tei_openapi.json").read_text())
        self.components = _as_json_schema(self.doc["components"])
        self.validator = jsonschema.Draft202012Validator
        self.version = self.doc["info"]["version"]

    def _schema(self, ref_holder):
        schema = copy.deepcopy(ref_holder)
        schema["components"] = self.components
        return schema

    def errors(self, schema, value):
        v = self.validator(self._schema(schema))
        return [f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message[:160]}"
                for e in v.iter_errors(value)]

    def request(self, method, route):
        op = self.doc["paths"][route][method]
        return op["requestBody"]["content"]["application/json"]["schema"]

    def response(self, method, route, status):
        """The schema of `status`'s body, or None when the route does not
        document that status."""
        responses = self.doc["paths"][route][method]["responses"]
        r = responses.get(str(status))
        if r is None:
            return None
        return r.get("content", {}).get("application/json", {}).get(
            "schema", {})


def _call(port, method, route, body=None, raw=None):
    data = raw if raw is not None else (
        None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{route}", data,
        {"Content-Type": "application/json"}, method=method.upper())
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as e:
        text = e.read()
        try:
            return e.code, json.loads(text)
        except ValueError:
            return e.code, text.decode(errors="replace")


def check(served, names, report):
    """`names`: {"embedder", "reranker", "classifier", "sparse"} -> a
    served model of that kind (or None: its routes are skipped)."""
    spec = Spec()
    embedder = names.get("embedder")
    reranker = names.get("reranker")
    classifier = names.get("classifier")
    sparse_model = names.get("sparse")
    long_text = "word " * 4000
    # (route, body, expected status); GET when body is None.
    calls = [("get", "/info", None, 200)]
    if embedder:
        calls += [
            ("post", "/embed", {"inputs": ["a short text", "another one"],
                                "model": embedder, "normalize": True}, 200),
            ("post", "/embed", {"inputs": "one text", "model": embedder,
                                "truncate": True,
                                "truncation_direction": "Right"}, 200),
            ("post", "/embed", {"inputs": long_text, "model": embedder},
             200),
            ("post", "/embed", {"inputs": long_text, "model": embedder,
                                "truncate": False}, 413),
            ("post", "/embed_all", {"inputs": ["tokens of this"],
                                    "model": embedder}, 200),
            ("post", "/similarity", {"inputs": {
                "source_sentence": "a cat sat", "sentences": [
                    "a dog sat", "the stock market"]},
                "model": embedder}, 200),
            ("post", "/tokenize", {"inputs": ["split me please"],
                                   "model": embedder}, 200),
            ("post", "/tokenize", {"inputs": "one more", "model": embedder,
                                   "add_special_tokens": False}, 200),
            ("post", "/decode", {"ids": [5, 6, 7], "model": embedder}, 200),
            ("post", "/v1/embeddings", {"input": ["openai shaped"],
                                        "model": embedder}, 200),
            ("post", "/rerank", {"query": "q", "texts": ["d"],
                                 "model": embedder}, 424),
            ("post", "/predict", {"inputs": "t", "model": embedder}, 424),
            ("post", "/embed_sparse", {"inputs": "t", "model": embedder},
             424),
        ]
    if reranker:
        calls += [
            ("post", "/rerank", {"query": "what is a cat",
                                 "texts": ["a cat is an animal",
                                           "stocks fell"],
                                 "return_text": True, "raw_scores": False,
                                 "model": reranker}, 200),
            ("post", "/rerank", {"query": "q", "texts": [],
                                 "model": reranker}, 400),
        ]
    if classifier:
        calls += [
            ("post", "/predict", {"inputs": "a text to label",
                                  "model": classifier}, 200),
            ("post", "/predict", {"inputs": [["premise", "hypothesis"]],
                                  "model": classifier}, 200),
            ("post", "/predict", {"inputs": ["one", "two"], "raw_scores": True,
                                  "model": classifier}, 200),
        ]
    if sparse_model:
        calls += [("post", "/embed_sparse", {"inputs": ["sparse text"],
                                             "model": sparse_model}, 200)]
    problems = []
    for method, route, body, want in calls:
        where = f"{method.upper()} {route} {json.dumps(body)[:60]}"
        if body is not None:
            bad = spec.errors(spec.request(method, route), body)
            if bad:
                problems.append(f"{where}: our test body is no TEI request: "
                                f"{bad[0]}")
                continue
        status, answer = _call(served.http_port, method, route, body)
        if status != want:
            problems.append(f"{where}: status {status}, expected {want}: "
                            f"{str(answer)[:160]}")
            continue
        schema = spec.response(method, route, status)
        if schema is None:
            problems.append(f"{where}: TEI documents no {status} here")
            continue
        bad = spec.errors(schema, answer)
        if bad:
            problems.append(f"{where}: {status} body: {bad[0]}")
    # A body that does not parse: 422 with TEI's error body.
    if embedder:
        status, answer = _call(served.http_port, "post", "/embed",
                               raw=b"{not json")
        schema = spec.response("post", "/embed", status)
        if status != 422 or schema is None or spec.errors(schema, answer):
            problems.append(f"POST /embed with a broken body: {status} "
                            f"{str(answer)[:120]}")
        calls.append(("post", "/embed", "broken", 422))
    report.add("tei", f"routes vs TEI {spec.version} OpenAPI schema",
               len(problems), 0, len(calls))
    for p in problems:
        report.fail(f"TEI schema: {p}")

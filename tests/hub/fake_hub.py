#!/usr/bin/env python3
"""A stand-in for the Hugging Face Hub, standard library only.

It answers the requests huggingface_hub (and server/hub) make to download a
model, from repositories laid out in a directory:

    ROOT/ORG/NAME/repo.json   {"commit": 40-hex, "branches": [...],
                               "lfs": [paths], "gated": bool}
    ROOT/ORG/NAME/files/...   the repository's files

Routes (those of huggingface_hub 2.4's hf_api.py and file_download.py):

    GET  /api/models/ORG/NAME/revision/REV   model info: "id", "sha",
                                             "siblings"[].rfilename
    GET  /api/models/ORG/NAME/tree/REV[/P]   the file listing
                                             (snapshot_download reads it)
    HEAD|GET /ORG/NAME/resolve/REV/PATH      a file: X-Repo-Commit, and
        ETag "<git blob sha1>" with the bytes for a regular file; for an
        LFS file a 302 to the storage server with X-Linked-Etag
        "<sha256>" and X-Linked-Size
    HEAD|GET /lfs/SHA256                     (storage server) the LFS
                                             bytes; honours Range

REV is a branch of "branches" or the commit itself. Errors as the Hub
gives them, with X-Error-Code: 404 RepoNotFound / RevisionNotFound /
EntryNotFound, 401 GatedRepo for a gated repository without a valid
"Authorization: Bearer" token.

The LFS storage listens on a second port: another origin, as the Hub's
CDN is, so that clients do not follow its redirect on HEAD.

Switches for tests (attributes of FakeHub, changeable while it runs):
drop_after[(repo, path)] = [n_bytes, times] closes the connection after
n_bytes of that LFS file, for the next `times` transfers; corrupt holds
(repo, path) pairs whose LFS payload is served with one byte changed;
ignore_range answers Range requests with the whole file (200);
throttle_bytes_per_s slows LFS transfers. Every request is logged in
`log` (dicts: server, method, path, range, auth).

Run alone, it serves ROOT and prints its endpoint:
    python fake_hub.py ROOT
"""
import argparse
import hashlib
import http.server
import json
import os
import socket
import threading
import time
import urllib.parse

TOKEN = "hf_fake_hub_test_token"
_CHUNK = 1 << 20


def git_blob_sha1(data):
    """The git object id of a blob: what the Hub's ETag of a regular file is."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def write_repo(root, repo_id, files, lfs=(), branches=("main",), gated=False):
    """Lays out a repository under ROOT; returns its commit hash.

    files: {path: bytes}; lfs: the paths stored as LFS files."""
    base = os.path.join(root, *repo_id.split("/"))
    listing = hashlib.sha1(repo_id.encode())
    for path in sorted(files):
        full = os.path.join(base, "files", *path.split("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "wb") as f:
            f.write(files[path])
        listing.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
    commit = listing.hexdigest()
    with open(os.path.join(base, "repo.json"), "w") as f:
        json.dump({"commit": commit, "branches": list(branches),
                   "lfs": sorted(lfs), "gated": gated}, f)
    return commit


class _Repo:
    def __init__(self, base, repo_id):
        with open(os.path.join(base, "repo.json")) as f:
            meta = json.load(f)
        self.id = repo_id
        self.commit = meta["commit"]
        self.branches = set(meta["branches"])
        self.lfs = set(meta["lfs"])
        self.gated = meta["gated"]
        self.files_dir = os.path.join(base, "files")
        self.paths = []
        for d, _, names in os.walk(self.files_dir):
            for n in names:
                rel = os.path.relpath(os.path.join(d, n), self.files_dir)
                self.paths.append(rel.replace(os.sep, "/"))
        self.paths.sort()
        self._digests = {}

    def file(self, path):
        return os.path.join(self.files_dir, *path.split("/"))

    def digest(self, path):
        """(size, git sha1, sha256) of a file, computed once."""
        if path not in self._digests:
            with open(self.file(path), "rb") as f:
                data = f.read()
            self._digests[path] = (len(data), git_blob_sha1(data),
                                   hashlib.sha256(data).hexdigest())
        return self._digests[path]


class FakeHub:
    def __init__(self, root, host="127.0.0.1"):
        self.root = root
        self.host = host
        self.log = []
        self.drop_after = {}
        self.corrupt = set()
        self.ignore_range = False
        self.throttle_bytes_per_s = 0
        self._lock = threading.Lock()
        self._repos = {}
        self._servers = []

    # -- repositories -----------------------------------------------------
    def repo(self, repo_id):
        with self._lock:
            if repo_id not in self._repos:
                base = os.path.join(self.root, *repo_id.split("/"))
                if not os.path.isfile(os.path.join(base, "repo.json")):
                    return None
                self._repos[repo_id] = _Repo(base, repo_id)
            return self._repos[repo_id]

    def lfs_object(self, sha256):
        """(repo, path) of the LFS file with this sha256."""
        with self._lock:
            repos = list(self._repos.values())
        for repo in repos:
            for path in repo.lfs:
                if repo.digest(path)[2] == sha256:
                    return repo, path
        return None, None

    # -- serving ----------------------------------------------------------
    def start(self):
        hub = self

        class Handler(_Handler):
            fake = hub

        for role in ("hub", "storage"):
            server = http.server.ThreadingHTTPServer((self.host, 0), Handler)
            server.daemon_threads = True
            server.role = role
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self._servers.append(server)
        return self

    def stop(self):
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers = []

    @property
    def endpoint(self):
        return "http://%s:%d" % (self.host, self._servers[0].server_address[1])

    @property
    def storage(self):
        return "http://%s:%d" % (self.host, self._servers[1].server_address[1])

    def requests(self, server=None, method=None, contains=None):
        with self._lock:
            entries = list(self.log)
        return [e for e in entries
                if (server is None or e["server"] == server)
                and (method is None or e["method"] == method)
                and (contains is None or contains in e["path"])]

    def _record(self, entry):
        with self._lock:
            self.log.append(entry)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake = None  # the FakeHub, set by FakeHub.start

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self._dispatch(head=True)

    def do_GET(self):
        self._dispatch(head=False)

    # -- plumbing ---------------------------------------------------------
    def _dispatch(self, head):
        role = self.server.role
        self.fake._record({"server": role, "method": self.command,
                           "path": self.path,
                           "range": self.headers.get("Range"),
                           "auth": self.headers.get("Authorization")})
        path = urllib.parse.urlsplit(self.path).path
        try:
            if role == "storage":
                if path.startswith("/lfs/"):
                    return self._lfs(path[len("/lfs/"):], head)
                return self._error(404, "EntryNotFound", "no such object", head)
            if path.startswith("/api/models/"):
                return self._api(path[len("/api/models/"):], head)
            if "/resolve/" in path:
                return self._resolve(path, head)
            return self._error(404, None, "not a route of this stand-in", head)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send(self, status, headers, body=b"", head=False):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _json(self, value, head):
        self._send(200, {"Content-Type": "application/json"},
                   json.dumps(value).encode(), head)

    def _error(self, status, code, message, head, extra=None):
        headers = {"Content-Type": "application/json",
                   "X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        headers.update(extra or {})
        self._send(status, headers, json.dumps({"error": message}).encode(),
                   head)

    def _authorized(self, repo):
        if not repo.gated:
            return True
        return self.headers.get("Authorization") == "Bearer " + TOKEN

    def _find(self, repo_part, rev, head):
        """The repository and commit, or None after answering an error."""
        repo = self.fake.repo(repo_part)
        if repo is None:
            self._error(404, "RepoNotFound", "Repository not found", head)
            return None
        if rev != repo.commit and rev not in repo.branches:
            self._error(404, "RevisionNotFound", "Invalid rev id: " + rev, head)
            return None
        return repo

    # -- the Hub's routes ---------------------------------------------------
    def _api(self, rest, head):
        for kind in ("/revision/", "/tree/"):
            if kind in rest:
                repo_part, _, tail = rest.partition(kind)
                break
        else:
            return self._error(404, None, "unknown API route", head)
        rev, _, sub = tail.partition("/")
        rev = urllib.parse.unquote(rev)
        repo = self._find(repo_part, rev, head)
        if repo is None:
            return
        if kind == "/revision/":
            return self._json({
                "id": repo.id, "modelId": repo.id, "sha": repo.commit,
                "private": False, "gated": "manual" if repo.gated else False,
                "siblings": [{"rfilename": p} for p in repo.paths]}, head)
        if not self._authorized(repo):
            return self._error(401, "GatedRepo", "Access to model %s is "
                               "restricted" % repo.id, head)
        prefix = urllib.parse.unquote(sub)
        entries = []
        for p in repo.paths:
            if prefix and not p.startswith(prefix.rstrip("/") + "/"):
                continue
            size, sha1, sha256 = repo.digest(p)
            entry = {"type": "file", "oid": sha1, "size": size, "path": p}
            if p in repo.lfs:
                entry["lfs"] = {"oid": sha256, "size": size, "pointerSize": 134}
            entries.append(entry)
        return self._json(entries, head)

    def _resolve(self, path, head):
        repo_part, _, tail = path.lstrip("/").partition("/resolve/")
        rev, _, file_path = tail.partition("/")
        rev = urllib.parse.unquote(rev)
        file_path = urllib.parse.unquote(file_path)
        repo = self._find(repo_part, rev, head)
        if repo is None:
            return
        commit = {"X-Repo-Commit": repo.commit}
        if not self._authorized(repo):
            return self._error(401, "GatedRepo", "Access to model %s is "
                               "restricted; you must be authenticated"
                               % repo.id, head, commit)
        if file_path not in repo.paths:
            return self._error(404, "EntryNotFound", "Entry not found", head,
                               commit)
        size, sha1, sha256 = repo.digest(file_path)
        if file_path in repo.lfs:
            self._send(302, dict(commit, **{
                "Location": "%s/lfs/%s" % (self.fake.storage, sha256),
                "X-Linked-Etag": '"%s"' % sha256,
                "X-Linked-Size": str(size),
                "ETag": '"%s"' % git_blob_sha1(b"pointer " + sha256.encode()),
            }), b"", head)
            return
        with open(repo.file(file_path), "rb") as f:
            data = f.read()
        self._send(200, dict(commit, ETag='"%s"' % sha1), data, head)

    def _lfs(self, sha256, head):
        repo, path = self.fake.lfs_object(sha256)
        if repo is None:
            return self._error(404, "EntryNotFound", "no such object", head)
        size = repo.digest(path)[0]
        start = 0
        wanted = self.headers.get("Range")
        if wanted and not self.fake.ignore_range:
            spec = wanted.strip()
            if not spec.startswith("bytes=") or not spec.endswith("-"):
                return self._error(400, None, "only bytes=N- ranges", head)
            start = int(spec[len("bytes="):-1])
            if start >= size:
                self._send(416, {"Content-Range": "bytes */%d" % size}, b"",
                           head)
                return
        status = 206 if start > 0 else 200
        self.send_response(status)
        self.send_header("Content-Length", str(size - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", '"%s"' % sha256)
        if status == 206:
            self.send_header("Content-Range",
                             "bytes %d-%d/%d" % (start, size - 1, size))
        self.end_headers()
        if head:
            return
        key = (repo.id, path)
        limit = None
        with self.fake._lock:
            drop = self.fake.drop_after.get(key)
            if drop and drop[1] > 0:
                drop[1] -= 1
                limit = drop[0]
        corrupt = key in self.fake.corrupt
        self._stream(repo.file(path), start, size, limit, corrupt)

    def _stream(self, file_path, start, size, limit, corrupt):
        sock = self.connection
        sent = 0
        throttle = self.fake.throttle_bytes_per_s
        began = time.monotonic()
        with open(file_path, "rb") as f:
            offset = start
            while offset < size:
                count = min(_CHUNK if throttle or corrupt or limit else 8 << 20,
                            size - offset)
                if limit is not None:
                    count = min(count, limit - sent)
                    if count <= 0:
                        # The connection drops mid-file.
                        self.close_connection = True
                        sock.shutdown(socket.SHUT_RDWR)
                        return
                if corrupt:
                    f.seek(offset)
                    data = bytearray(f.read(count))
                    if offset == start:
                        data[0] ^= 0xFF
                    sock.sendall(data)
                    n = len(data)
                else:
                    n = os.sendfile(sock.fileno(), f.fileno(), offset, count)
                    if n == 0:
                        break
                offset += n
                sent += n
                if throttle:
                    ahead = sent / throttle - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", help="directory of ORG/NAME repositories")
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    hub = FakeHub(args.root, args.host).start()
    print(hub.endpoint, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        hub.stop()


if __name__ == "__main__":
    main()

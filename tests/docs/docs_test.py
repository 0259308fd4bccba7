#!/usr/bin/env python3
"""The documentation against the tree it describes, so that it cannot rot:

1. README.md has at most 300 lines.
2. Every relative link in README.md, CONTRIBUTING.md, TESTING.md and
   docs/*.md names a file (or directory) that exists, and every `#anchor`
   a heading of the file it points at, by GitHub's rules (lowercase;
   punctuation other than '-' and '_' dropped; spaces as '-'; a repeated
   heading gets -1, -2, ...).
3. docs/README.md, the index, links every page in docs/.
4. Every fenced shell block of README.md (```sh, ```bash, ```console) is
   accounted for by the HTML comment on the line before it:

   <!-- check: run -->             the block runs against an encoder-server
                                    started from --binary with its built-in
                                    models (gRPC and HTTP on free ports), and
                                    must exit 0 and print something;
   <!-- check: run creates=FILE --> the same, and it must write FILE (not
                                    empty) instead of printing;
   <!-- check: ctest NAME -->       CTest NAME is registered in --build-dir
                                    and its script contains every command
                                    line of the block: that test runs it;
   <!-- check: parse -->            for what needs Docker, a GPU or the whole
                                    set-up: each command is checked by what
                                    it names (a script, Dockerfile or
                                    directory exists; every flag given to
                                    encoder-server, or to an encoder-server
                                    image after its name, is one --help
                                    lists; a `docker run` image is one the
                                    documentation builds with `docker build
                                    -t`); its curl lines run against the
                                    server as in `run`. A command it does
                                    not know fails the check.

   A ```python block may be marked `run` too: it runs with --python and
   client/python on PYTHONPATH. Unmarked blocks of other languages are
   prose. In the blocks that run, `localhost:8080` and `127.0.0.1:8080`
   become the server's HTTP port, `localhost:50051` and `127.0.0.1:50051`
   its gRPC port, `build/` the build directory, an `encoder-client`
   command without `--target` gets the server's, and curl fails on an HTTP
   error status.

docs/benchmarks-history.md is where BENCHMARKS.md's sections move, under
the same headings; until it exists, links into it are checked against
BENCHMARKS.md's headings.

Usage: docs_test.py --binary BUILD/encoder-server --build-dir BUILD
       [--source-dir ROOT] [--python PY] [--ctest CTEST]
"""
import argparse
import json
import os
import pathlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

README_MAX_LINES = 300
LINKED_FILES = ["README.md", "CONTRIBUTING.md", "TESTING.md", "BENCHMARKS.md",
                "CHANGELOG.md", "docs/*.md"]
SHELL_LANGS = {"sh", "bash", "console", "shell"}
BLOCK_TIMEOUT_S = 180
# ENCODER_TEST_TIME_SCALE: how much slower this build runs than a plain one.
TIME_SCALE = int(os.environ.get("ENCODER_TEST_TIME_SCALE", "1"))

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
MARKER = re.compile(r"^<!--\s*check:\s*(.*?)\s*-->\s*$")
LINK = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?"
                  r"(?:\s+\"[^\"]*\")?\s*\)")
IMAGE_LINK = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


class Failures:
    def __init__(self):
        self.items = []

    def add(self, where, what):
        self.items.append(f"{where}: {what}")


# ---------------------------------------------------------------- markdown

def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    out, fence = [], None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if m and fence is None:
            fence = m.group(2)[0] * len(m.group(2))
            continue
        if fence is not None:
            if line.strip().startswith(fence) and \
                    line.strip().strip(fence[0]) == "":
                fence = None
            continue
        out.append((number, line))
    return out


def code_blocks(text):
    """[(line of the fence, language, body, marker or None)]: every fenced
    block, with the check marker on the nearest non-blank line above."""
    lines = text.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group(2)
        start, lang = i, m.group(3).lower()
        j = i + 1
        while j < len(lines) and not (
                lines[j].strip().startswith(fence) and
                lines[j].strip().strip(fence[0]) == ""):
            j += 1
        above = start - 1
        while above >= 0 and not lines[above].strip():
            above -= 1
        marker = None
        if above >= 0:
            mm = MARKER.match(lines[above].strip())
            if mm:
                marker = mm.group(1)
        blocks.append((start + 1, lang, "\n".join(lines[start + 1:j]),
                       marker))
        i = j + 1
    return blocks


def strip_inline_code(line):
    return re.sub(r"(`+)(?:(?!\1).)*?\1", "", line)


def github_anchor(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # link text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if not m:
            continue
        base = github_anchor(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    for m in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"",
                         path.read_text(encoding="utf-8")):
        out.add(m.group(1))
    return out


def linked_files(root):
    files = []
    for pattern in LINKED_FILES:
        files += sorted(root.glob(pattern))
    return files


def links(path):
    """(line number, target) of every link in the prose of `path`."""
    out = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        line = strip_inline_code(line)
        for regex in (LINK, IMAGE_LINK):
            for m in regex.finditer(line):
                out.append((number, m.group(1)))
    return out


def check_readme_length(root, failures):
    count = len((root / "README.md").read_text(encoding="utf-8")
                .splitlines())
    print(f"README.md: {count} lines (at most {README_MAX_LINES})")
    if count > README_MAX_LINES:
        failures.add("README.md", f"{count} lines, more than "
                     f"{README_MAX_LINES}: move the detail to docs/")


def check_links(root, failures):
    cache, checked = {}, 0
    for path in linked_files(root):
        rel = path.relative_to(root)
        for number, target in links(path):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:
                continue
            checked += 1
            where = f"{rel}:{number}"
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part \
                else path.resolve()
            try:
                dest_rel = dest.relative_to(root.resolve()).as_posix()
            except ValueError:
                failures.add(where, f"{target} leaves the repository")
                continue
            if not dest.exists():
                failures.add(where, f"{target}: no such file {dest_rel}")
                continue
            if not anchor:
                continue
            if dest.is_dir() or dest.suffix.lower() != ".md":
                failures.add(where, f"{target}: an anchor into a file that "
                             "is not Markdown")
                continue
            if dest not in cache:
                cache[dest] = anchors(dest)
            if anchor not in cache[dest]:
                failures.add(where, f"{target}: no heading with anchor "
                             f"#{anchor} in {dest.relative_to(root)}")
    print(f"links: {checked} relative links checked")


def check_index(root, failures):
    index = root / "docs" / "README.md"
    if not index.exists():
        failures.add("docs/README.md", "the index page is missing")
        return
    linked = set()
    for _, target in links(index):
        file_part = target.partition("#")[0]
        if file_part:
            linked.add((index.parent / file_part).resolve())
    pages = [p for p in sorted((root / "docs").glob("*.md")) if p != index]
    for page in pages:
        if page.resolve() not in linked:
            failures.add("docs/README.md",
                         f"does not link docs/{page.name}")
    print(f"index: docs/README.md links {len(pages)} pages checked")


# ---------------------------------------------------------------- the server

class Server:
    """encoder-server with its built-in models, gRPC and HTTP on free
    ports read back from its ready file."""

    def __init__(self, binary, work):
        self.ready_file = work / "ready.json"
        self.log_path = work / "server.log"
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [str(binary), "--listen=127.0.0.1:0",
             f"--ready-file={self.ready_file}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 180 * TIME_SCALE
        while not self.ready_file.exists():
            if self.process.poll() is not None or \
                    time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("encoder-server did not start:\n" +
                                   self.log_path.read_text()[-3000:])
            time.sleep(0.1)
        ready = json.loads(self.ready_file.read_text())
        self.grpc_port, self.http_port = ready["grpc_port"], \
            ready["http_port"]

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def substitute(body, server, build_dir):
    http, grpc = f"127.0.0.1:{server.http_port}", \
        f"127.0.0.1:{server.grpc_port}"
    body = re.sub(r"\b(?:localhost|127\.0\.0\.1):8080\b", http, body)
    body = re.sub(r"\b(?:localhost|127\.0\.0\.1):50051\b", grpc, body)
    body = re.sub(r"(?<![\w./-])build/", str(build_dir) + "/", body)
    if "--target" not in body:
        body = re.sub(r"(encoder-client\s+)([a-z]+)",
                      rf"\1\2 --target {grpc}", body)
    # Each call's deadline scaled as the suite's timeouts are (a sanitizer
    # build runs Diagnose several times slower than the 30 s default).
    if "--deadline-ms" not in body and TIME_SCALE > 1:
        body = re.sub(r"(encoder-client\s+)(report|diagnose)\b",
                      rf"\1\2 --deadline-ms {30000 * TIME_SCALE}", body)
    return body


def run_block(lang, body, creates, server, args, work, where, failures):
    body = substitute(body, server, args.build_dir)
    env = dict(os.environ)
    if lang == "python":
        env["PYTHONPATH"] = str(args.source_dir / "client" / "python")
        command = [args.python, "-c", body]
    else:
        # curl answers an HTTP error with exit 22 and prints its body.
        script = ("set -eo pipefail\n"
                  "curl() { command curl --fail-with-body \"$@\"; }\n" +
                  body)
        command = ["bash", "-c", script]
    try:
        done = subprocess.run(command, cwd=work, env=env, text=True,
                              capture_output=True,
                              timeout=BLOCK_TIMEOUT_S * TIME_SCALE)
    except subprocess.TimeoutExpired:
        failures.add(where, "did not finish in "
                     f"{BLOCK_TIMEOUT_S * TIME_SCALE} s")
        return
    shown = (done.stdout[-1500:] + done.stderr[-1500:]).strip()
    if done.returncode != 0:
        failures.add(where, f"exited {done.returncode}:\n{shown}")
    elif creates:
        out = work / creates
        if not out.exists() or out.stat().st_size == 0:
            failures.add(where, f"wrote no {creates}")
    elif not done.stdout.strip():
        failures.add(where, "printed nothing")


# ---------------------------------------------------------------- ctest

def registered_tests(args):
    done = subprocess.run([args.ctest, "--show-only=json-v1"],
                          cwd=args.build_dir, capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"ctest --show-only failed: {done.stderr}")
    return {t["name"]: t.get("command", [])
            for t in json.loads(done.stdout)["tests"]}


def command_lines(body):
    """[(line, words)]: the block's commands as written (continuation lines
    joined, a `$ ` prompt dropped) and as shell words (comments dropped)."""
    out, pending = [], ""
    for line in body.split("\n"):
        line = line.rstrip()
        if line.startswith("$ "):
            line = line[2:]
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split()
        if words:
            out.append((line, words))
    return out


def check_ctest_block(name, body, tests, args, where, failures):
    if name not in tests:
        failures.add(where, f"CTest {name} is not registered in "
                     f"{args.build_dir}")
        return
    sources = []
    for word in tests[name]:
        p = pathlib.Path(word)
        if p.suffix not in (".py", ".sh", ".cc", ".js"):
            continue
        # The script as this tree has it, where the build was configured
        # from another checkout of the same sources.
        if args.build_source_dir and \
                args.build_source_dir in p.parents:
            p = args.source_dir / p.relative_to(args.build_source_dir)
        if p.is_file() and args.source_dir in p.resolve().parents:
            sources.append(p)
    if not sources:
        failures.add(where, f"CTest {name} runs no script of the source "
                     f"tree: {tests[name]}")
        return
    text = " ".join(" ".join(p.read_text(encoding="utf-8").split())
                    for p in sources)
    names = ", ".join(p.name for p in sources)
    for _, words in command_lines(body):
        line = " ".join(words)
        if line not in text:
            failures.add(where, f"CTest {name} ({names}) does not contain "
                         f"{line!r}")


# ---------------------------------------------------------------- parse

def server_flags(binary):
    help_text = subprocess.run([str(binary), "--help"], capture_output=True,
                               text=True, timeout=60).stdout
    flags = set()
    for line in help_text.splitlines():
        m = re.match(r"^\s+(-[^\s]+)", line)
        if m:
            names = re.sub(r"\{[^}]*\}", "", m.group(1))
            flags.update(n for n in names.split(",") if n.startswith("-"))
    return flags


def documented_images(root):
    images = set()
    for path in linked_files(root):
        for m in re.finditer(r"docker build\b[^\n`]*?-t\s+([\w.:/-]+)",
                             path.read_text(encoding="utf-8")):
            images.add(m.group(1))
    return images


def flags_of(words):
    """The flag names among `words` (--name=value gives --name)."""
    return [w.split("=", 1)[0] for w in words if w.startswith("-")]


def parse_command(words, ctx, where, failures):
    """One command (a list of words); returns whether it is a curl line to
    run."""
    root = ctx["root"]
    if all(re.match(r"^[A-Za-z_]\w*=", w) for w in words):
        return False  # variable assignments
    while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
        words = words[1:]  # VAR=value command
    head = words[0]
    if head == "bash":
        script = words[1] if len(words) > 1 else ""
        if not (root / script).is_file():
            failures.add(where, f"bash {script}: no such script")
        return False
    if head in ("mkdir", "openssl"):
        return False
    if head == "curl":
        return True
    if re.search(r"(^|/)encoder-server$", head):
        unknown = [f for f in flags_of(words[1:])
                   if f not in ctx["flags"]]
        if unknown:
            failures.add(where, f"encoder-server --help lists no "
                         f"{', '.join(unknown)}")
        return False
    if head == "docker" and len(words) > 1:
        verb = words[1]
        if verb == "build":
            if "-f" in words:
                dockerfile = words[words.index("-f") + 1]
                if not (root / dockerfile).is_file():
                    failures.add(where, f"no Dockerfile {dockerfile}")
            return False
        if verb == "compose":
            if not (root / "docker-compose.yml").is_file():
                failures.add(where, "no docker-compose.yml")
            return False
        if verb == "run":
            image_at = next((i for i, w in enumerate(words[2:], 2)
                             if re.match(r"^encoder-server(:|$)", w)), None)
            if image_at is None:
                failures.add(where, "docker run of no encoder-server image")
                return False
            image = words[image_at]
            if image not in ctx["images"]:
                failures.add(where, f"image {image} is not one the "
                             "documentation builds (docker build -t)")
            unknown = [f for f in flags_of(words[image_at + 1:])
                       if f not in ctx["flags"]]
            if unknown:
                failures.add(where, f"{image}: encoder-server --help lists "
                             f"no {', '.join(unknown)}")
            return False
    if head == "kubectl" and "-k" in words:
        directory = words[words.index("-k") + 1]
        if not (root / directory / "kustomization.yaml").is_file():
            failures.add(where, f"no kustomization in {directory}")
        return False
    failures.add(where, f"the parse check does not know {head!r}: mark "
                 "the block differently or teach docs_test.py")
    return False


def check_parse_block(body, ctx, where, failures):
    """Checks each command of the block; returns the curl lines to run."""
    runnable = []
    for line, words in command_lines(body):
        parts, part = [], []
        for word in words + ["&&"]:
            if word in ("&&", "||", ";"):
                if ">" in part:
                    part = part[:part.index(">")]
                if part:
                    parts.append(part)
                part = []
            else:
                part.append(word)
        for part in parts:
            if parse_command(part, ctx, where, failures):
                if len(parts) > 1:
                    failures.add(where, "a curl command shares its line "
                                 "with another command")
                else:
                    runnable.append(line)
    return runnable


# ---------------------------------------------------------------- blocks

def check_readme_blocks(args, failures):
    root = args.source_dir
    readme = (root / "README.md").read_text(encoding="utf-8")
    blocks = code_blocks(readme)
    marked_lines = {number for number, _, _, marker in blocks if marker}
    for number, line in enumerate(readme.split("\n"), 1):
        if MARKER.match(line.strip()):
            nxt = number + 1
            lines = readme.split("\n")
            while nxt <= len(lines) and not lines[nxt - 1].strip():
                nxt += 1
            if nxt not in marked_lines:
                failures.add(f"README.md:{number}",
                             "a check marker with no code block after it")

    todo, ctest_blocks = [], []
    for number, lang, body, marker in blocks:
        where = f"README.md:{number} (```{lang})"
        if lang not in SHELL_LANGS and not (lang == "python" and marker):
            continue
        if marker is None:
            failures.add(where, "shell block without a check marker "
                         "(<!-- check: run | ctest NAME | parse -->)")
            continue
        kind, _, rest = marker.partition(" ")
        if kind == "run":
            creates = None
            if rest:
                m = re.fullmatch(r"creates=(\S+)", rest.strip())
                if not m:
                    failures.add(where, f"unknown run option {rest!r}")
                    continue
                creates = m.group(1)
            todo.append(("run", where, lang, body, creates))
        elif kind == "ctest" and rest.strip() and lang in SHELL_LANGS:
            ctest_blocks.append((rest.strip(), where, body))
        elif kind == "parse" and lang in SHELL_LANGS:
            todo.append(("parse", where, lang, body, None))
        else:
            failures.add(where, f"unknown check marker {marker!r}")

    if ctest_blocks:
        tests = registered_tests(args)
        for name, where, body in ctest_blocks:
            check_ctest_block(name, body, tests, args, where, failures)

    ctx = {"root": root, "flags": server_flags(args.binary),
           "images": documented_images(root)}
    to_run = []
    for kind, where, lang, body, creates in todo:
        if kind == "run":
            to_run.append((where, lang, body, creates))
        else:
            for line in check_parse_block(body, ctx, where, failures):
                to_run.append((where + " curl", "sh", line, None))
    print(f"README blocks: {len(blocks)} fenced, {len(ctest_blocks)} "
          f"named CTests, {len(todo) - sum(k == 'run' for k, *_ in todo)} "
          f"parsed, {len(to_run)} run")
    if not to_run:
        return
    with tempfile.TemporaryDirectory(prefix="docs-test-") as tmp:
        work = pathlib.Path(tmp)
        server = Server(args.binary, work)
        try:
            for where, lang, body, creates in to_run:
                block_dir = work / f"block{len(os.listdir(work))}"
                block_dir.mkdir()
                run_block(lang, body, creates, server, args, block_dir,
                          where, failures)
        finally:
            server.stop()


def main():
    here = pathlib.Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", required=True, type=pathlib.Path,
                        help="encoder-server")
    parser.add_argument("--build-dir", required=True, type=pathlib.Path,
                        help="the build directory (CTest's registrations, "
                        "encoder-client)")
    parser.add_argument("--source-dir", type=pathlib.Path,
                        default=here.parents[1])
    parser.add_argument("--python", default="/usr/bin/python3",
                        help="runs the Python blocks: needs numpy and grpcio")
    parser.add_argument("--ctest", default=shutil.which("ctest") or "ctest")
    args = parser.parse_args()
    args.binary = args.binary.resolve()
    args.build_dir = args.build_dir.resolve()
    args.source_dir = args.source_dir.resolve()
    args.build_source_dir = None
    cache = args.build_dir / "CMakeCache.txt"
    if cache.exists():
        m = re.search(r"^CMAKE_HOME_DIRECTORY:INTERNAL=(.*)$",
                      cache.read_text(errors="replace"), re.M)
        if m:
            args.build_source_dir = pathlib.Path(m.group(1)).resolve()

    failures = Failures()
    check_readme_length(args.source_dir, failures)
    check_links(args.source_dir, failures)
    check_index(args.source_dir, failures)
    check_readme_blocks(args, failures)
    if failures.items:
        print(f"\nFAILED: {len(failures.items)} problem(s)")
        for item in failures.items:
            print(f"- {item}")
        return 1
    print("\nOK")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The images' Debian packages, checked without a container engine.

deploy/Dockerfile's runtime stage starts from a bare Debian, installs a list
of Debian packages (today `install_deps.sh runtime`, the runtime_pkgs of
scripts/install_deps.sh; an inline `apt-get install` is read as well) and
copies the binaries from the build stage and LibTorch's libraries. Every
other shared library a shipped binary loads must come from a package that
stage installs. This test reads the list out of the Dockerfile itself (and
the install_deps.sh it copies) and, for each binary the stage COPYs from
/build (encoder-server, encoder-client, encoder-config-keys, encoder-hub,
libencoder_spm.so), takes this build's copy and checks every library `ldd`
lists:

- one inside the LibTorch tree the build links (ENCODER_TORCH_WHEEL's
  parent: torch/lib and nvidia/, which the stage copies) is the image's
  own (image_runtime_test.py checks that those resolve there);
- any other must be owned by a Debian package (`dpkg -S`) that the stage
  installs: one of its list, or one of the base image's (Essential or
  Priority required in this Debian, what debian:bookworm holds), or a
  Depends / Pre-Depends of those, recursively, which apt-get installs with
  them (--no-install-recommends leaves out only Recommends). The report
  says which, with the chain of dependencies for the last kind.
  A library not found, or no package's, fails.

deploy/Dockerfile.cuda's runtime stage is checked the same way where it
can be: its binaries are a CUDA build, not made here, so its package list
must provide every Debian library this build's binaries of the same names
load, and, when the project's .venv holds the CUDA torch wheel the image
copies (--venv-python), every Debian library that the CUDA LibTorch
libraries the server links (libtorch_cuda, libc10_cuda, libtorch,
libtorch_cpu, libc10) load, but libcuda.so.1, which the host's driver
brings through the NVIDIA container runtime.

The check proves it can fail, every run: from a copy of install_deps.sh
without one needed package of the runtime list (the first listed package
that a shipped binary needs and nothing else installs), from a copy of the
Dockerfile that installs the same list inline but for that package (and
with the package, which must pass), and from one that installs nothing,
it must report the libraries left without a package.

The packages' facts come from this machine's dpkg database (apt-cache for
a listed package not installed here), so the host must be the Debian
release of the Dockerfile's runtime stage; on another one the test is
skipped (exit 77).

Usage: image_packages_test.py --source-dir DIR --build-dir DIR
         --torch-dir DIR [--venv-python PY] [--time-limit S]
"""
import glob
import os
import re
import shlex
import subprocess
import sys

import deploy_util as du

SKIP_CODE = 77
# Libraries the kernel or the host brings, never a package of the image.
NO_PACKAGE = {"linux-vdso.so.1"}
# The CUDA driver's library: the host's, mounted by the NVIDIA runtime.
HOST_DRIVER = {"libcuda.so.1"}
# What the CUDA server links of the CUDA LibTorch (scripts/cuda_build.sh
# checks libtorch_cuda and libc10_cuda are linked).
CUDA_TORCH_LIBS = ("libtorch_cuda.so", "libc10_cuda.so", "libtorch.so",
                   "libtorch_cpu.so", "libc10.so")


# --- the Dockerfile ----------------------------------------------------------

def instructions(text):
    """(keyword, arguments) of each instruction, continuation lines joined
    and comments dropped."""
    out, current = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        keyword, _, rest = current.partition(" ")
        out.append((keyword.upper(), rest.strip()))
        current = ""
    if current:
        keyword, _, rest = current.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def runtime_stage(text):
    """The instructions of the stage named runtime, and its base image."""
    stage, base, inside = [], None, False
    for keyword, rest in instructions(text):
        if keyword == "FROM":
            words = rest.split()
            inside = len(words) >= 3 and words[-2].upper() == "AS" and \
                words[-1] == "runtime"
            if inside:
                base = words[0]
            continue
        if inside:
            stage.append((keyword, rest))
    if base is None:
        raise du.CheckFailed("no `FROM ... AS runtime` stage")
    return base, stage


def copy_args(rest):
    """(--from stage or None, sources, destination) of a COPY."""
    words = shlex.split(rest)
    source_stage = None
    plain = []
    for w in words:
        if w.startswith("--from="):
            source_stage = w.split("=", 1)[1]
        elif not w.startswith("--"):
            plain.append(w)
    return source_stage, plain[:-1], plain[-1] if plain else None


def shell_commands(command):
    """The simple commands of a RUN's shell text, as word lists."""
    for part in re.split(r"&&|\|\||;|\||\n", command):
        try:
            words = shlex.split(part)
        except ValueError:
            words = part.split()
        if words:
            yield words


def script_arrays(script_text):
    """NAME=(...) arrays of a bash script, as lists of words."""
    arrays = {}
    for m in re.finditer(r"^(\w+)=\(([^)]*)\)", script_text, re.MULTILINE):
        words = []
        for line in m.group(2).splitlines():
            words += line.split("#", 1)[0].split()
        arrays[m.group(1)] = words
    return arrays


def stage_packages(stage, read_source):
    """The packages the stage's RUNs install, and where each list came
    from: [(repository path or None for an inline apt-get, count)].
    read_source(path in the repository) gives a file's text."""
    copied_from = {}  # destination in the image -> source in the context
    for keyword, rest in stage:
        if keyword == "COPY":
            source_stage, sources, dest = copy_args(rest)
            if source_stage is None:
                for s in sources:
                    target = dest
                    if dest.endswith("/"):
                        target = dest + os.path.basename(s)
                    copied_from[target] = s
    packages, origins = [], []
    for keyword, rest in stage:
        if keyword != "RUN":
            continue
        for words in shell_commands(rest):
            if words[0] in ("apt-get", "apt") and "install" in words:
                after = words[words.index("install") + 1:]
                listed = [x.split("=", 1)[0] for x in after
                          if not x.startswith("-")]
                packages += listed
                origins.append((None, len(listed)))
                continue
            # install_deps.sh run as the command or by a shell.
            script = words[1:2] if words[0] in ("bash", "sh") else words[:1]
            if not script or not script[0].endswith("install_deps.sh"):
                continue
            at = words.index(script[0])
            mode = words[at + 1] if at + 1 < len(words) else "test"
            source = copied_from.get(script[0])
            if source is None:
                raise du.CheckFailed(f"the runtime stage runs {script[0]}, "
                                     "which no COPY puts there")
            arrays = script_arrays(read_source(source))
            names = {"runtime": ["runtime_pkgs"], "build": ["build_pkgs"],
                     "test": ["build_pkgs", "test_pkgs"]}.get(mode)
            if not names or any(n not in arrays for n in names):
                raise du.CheckFailed(f"cannot read `{source} {mode}`'s "
                                     "packages")
            listed = [p for n in names for p in arrays[n]]
            packages += listed
            origins.append((f"{source} {mode}", len(listed)))
    return packages, origins


def describe(origins):
    return ", ".join(f"{source or 'inline apt-get install'} ({count})"
                     for source, count in origins) or "nothing"


def shipped(stage):
    """Binaries the stage COPYs from /build, and the other trees it copies
    from the build stage (LibTorch's)."""
    binaries, trees = [], []
    for keyword, rest in stage:
        if keyword != "COPY":
            continue
        source_stage, sources, _ = copy_args(rest)
        if source_stage is None:
            continue
        for s in sources:
            (binaries if s.startswith("/build/") else trees).append(s)
    return binaries, trees


# --- libraries and packages --------------------------------------------------

def ldd(path, env=None):
    """[(soname, resolved path or None)] of `ldd path`."""
    result = subprocess.run(["ldd", path], capture_output=True, text=True,
                            timeout=120, env=env)
    if result.returncode != 0:
        raise du.CheckFailed(f"ldd {path}: {result.stdout}{result.stderr}")
    libs = []
    for line in result.stdout.splitlines():
        line = line.strip()
        if "=>" in line:
            name, _, target = line.partition("=>")
            target = target.strip()
            resolved = None if target.startswith("not found") else \
                target.split(" (")[0].strip()
            libs.append((name.strip(), resolved))
        elif line:
            first = line.split(" (")[0].strip()
            libs.append((os.path.basename(first) if first.startswith("/")
                         else first, first if first.startswith("/") else None))
    return libs


def path_variants(path):
    """The path, its target, and each with and without /usr (merged /usr:
    dpkg knows a file by the path its package ships)."""
    out = []
    for p in (path, os.path.realpath(path)):
        for q in (p, p[4:] if p.startswith("/usr/") else "/usr" + p):
            if q not in out:
                out.append(q)
    return out


def owners(paths):
    """{path: package} for the paths dpkg knows (any variant)."""
    variants = {p: path_variants(p) for p in paths}
    every = sorted({v for vs in variants.values() for v in vs})
    if not every:
        return {}
    result = subprocess.run(["dpkg", "-S", *every], capture_output=True,
                            text=True, timeout=120)
    found = {}
    for line in result.stdout.splitlines():
        if line.startswith("diversion "):
            continue
        packages, sep, file = line.rpartition(": ")
        if not sep:
            continue
        package = packages.split(",")[0].strip().split(":")[0]
        found.setdefault(file.strip(), package)
    return {p: next((found[v] for v in vs if v in found), None)
            for p, vs in variants.items()}


def parse_relations(text):
    """Depends-style text -> [[alternative package names]]."""
    clauses = []
    for clause in text.split(","):
        alts = [a.strip().split(" ")[0].split(":")[0]
                for a in clause.split("|") if a.strip()]
        if alts:
            clauses.append(alts)
    return clauses


class PackageDb:
    """Essential, Priority, Depends + Pre-Depends and Provides of this
    machine's installed packages; apt-cache for others."""

    FIELDS = "${Package}\t${Essential}\t${Priority}\t${Pre-Depends}\t" \
             "${Depends}\t${Provides}\t${db:Status-Abbrev}\n"

    def __init__(self):
        out = subprocess.run(["dpkg-query", "-W", "-f=" + self.FIELDS],
                             capture_output=True, text=True, timeout=120,
                             check=True).stdout
        self.info = {}
        self.providers = {}
        for line in out.splitlines():
            name, essential, priority, pre, dep, provides, status = \
                (line.split("\t") + [""] * 7)[:7]
            if not status.startswith("ii"):
                continue
            self._add(name, essential, priority, pre + ", " + dep, provides)

    def _add(self, name, essential, priority, relations, provides):
        self.info[name] = {"essential": essential == "yes",
                           "priority": priority,
                           "depends": parse_relations(relations)}
        for alts in parse_relations(provides):
            self.providers.setdefault(alts[0], []).append(name)

    def known(self, name):
        if name in self.info or name in self.providers:
            return True
        result = subprocess.run(
            ["apt-cache", "show", "--no-all-versions", name],
            capture_output=True, text=True, timeout=60)
        if result.returncode != 0 or not result.stdout.strip():
            return False
        fields = {}
        for line in result.stdout.split("\n\n")[0].splitlines():
            if ":" in line and not line.startswith(" "):
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        self._add(name, fields.get("Essential", "no"),
                  fields.get("Priority", ""),
                  fields.get("Pre-Depends", "") + ", " +
                  fields.get("Depends", ""), fields.get("Provides", ""))
        return True

    def base(self):
        """The base image's packages: Essential or Priority required."""
        return sorted(n for n, i in self.info.items()
                      if i["essential"] or i["priority"] == "required")

    def closure(self, roots):
        """{package: the package that pulled it in, or None for a root}."""
        why = {}
        queue = []
        for r in roots:
            if r not in why and self.known(r):
                why[r] = None
                queue.append(r)
        while queue:
            name = queue.pop(0)
            deferred = []
            for alts in self.info.get(name, {}).get("depends", []):
                if len(alts) > 1:
                    deferred.append(alts)
                    continue
                self._pull(alts, name, why, queue)
            for alts in deferred:  # an alternative already in wins
                self._pull(alts, name, why, queue)
        return why

    def _pull(self, alts, parent, why, queue):
        real = []
        for a in alts:
            if a in why:
                return
            if any(p in why for p in self.providers.get(a, [])):
                return
            if a in self.info:
                real.append(a)
            real += self.providers.get(a, [])
        for candidate in real or [a for a in alts if self.known(a)]:
            why[candidate] = parent
            queue.append(candidate)
            return


def chain(why, package):
    links = [package]
    while why.get(links[-1]) is not None:
        links.append(why[links[-1]])
    return " <- ".join(links)


class Libraries:
    """The libraries each binary loads, gathered once."""

    def __init__(self, binaries, tree, env=None, exempt=()):
        self.tree = os.path.realpath(tree) + os.sep
        self.loaded = {}  # binary -> [(soname, path or None)]
        for label, path in binaries:
            self.loaded[label] = ldd(path, env)
        self.exempt = set(exempt)
        system = {p for libs in self.loaded.values() for n, p in libs
                  if p and not self.copied(p)}
        self.owner = owners(system)

    def copied(self, path):
        return os.path.realpath(path).startswith(self.tree)

    def evaluate(self, db, listed, base):
        """(failures, report lines) for the packages a stage installs."""
        unknown = [p for p in listed if not db.known(p)]
        why = db.closure(list(listed) + base)
        why_base = db.closure(base)
        listed_set, base_set = set(listed), set(base)
        failures = [f"listed package {p} is unknown to dpkg and apt"
                    for p in unknown]
        report = {}
        for label, libs in self.loaded.items():
            for name, path in libs:
                if name in NO_PACKAGE or name in self.exempt:
                    continue
                if path is None:
                    failures.append(f"{label}: {name} not found")
                    continue
                if self.copied(path):
                    continue
                package = self.owner.get(path)
                if package is None:
                    failures.append(f"{label}: {path} belongs to no Debian "
                                    "package")
                    continue
                if package not in why:
                    failures.append(
                        f"{label}: {name} ({path}) is {package}'s, which the "
                        "runtime stage does not install (not listed, not "
                        "the base image's, no dependency of either)")
                    continue
                if package in listed_set:
                    how = "listed"
                elif package in base_set:
                    how = "base image"
                elif package in why_base:
                    how = "base image, as " + chain(why_base, package)
                else:
                    how = "dependency: " + chain(why, package)
                report.setdefault((name, package, how), []).append(label)
        lines = [f"  {name:44} {package:22} {how}"
                 for (name, package, how) in sorted(report)]
        return failures, lines

    def needed_packages(self):
        return {self.owner.get(p) for libs in self.loaded.values()
                for n, p in libs if p and not self.copied(p)} - {None}


# --- the test ----------------------------------------------------------------

def host_codename():
    with open("/etc/os-release") as f:
        for line in f:
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"')
    return ""


def venv_torch_dir(python):
    """torch/ of the venv whose Python this is, when it holds the wheel."""
    if not python or not os.path.exists(python):
        return None
    venv = os.path.dirname(os.path.dirname(python))
    found = sorted(glob.glob(os.path.join(venv, "lib", "python3*",
                                          "site-packages", "torch")))
    return found[0] if found else None


def first_failure_with(failures, needle):
    return next((f for f in failures if needle in f), None)


def main():
    parser = du.common_args(__doc__)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--torch-dir", required=True,
                        help="ENCODER_TORCH_WHEEL of the build")
    parser.add_argument("--venv-python",
                        help="Python of .venv, whose torch wheel is the "
                             "CUDA image's LibTorch")
    args = parser.parse_args()
    src = args.source_dir

    def read_source(path):
        with open(os.path.join(src, path)) as f:
            return f.read()

    dockerfile = read_source("deploy/Dockerfile")
    base_image, stage = runtime_stage(dockerfile)
    codename = host_codename()
    if not base_image.startswith("debian:") or \
            base_image.split(":", 1)[1] != codename:
        print(f"SKIPPED: the runtime stage is {base_image}, this host is "
              f"Debian {codename or '(unknown)'}: its packages would not "
              "be the image's")
        sys.exit(SKIP_CODE)

    with du.Harness(args, "image-packages"):
        checks = du.Checks()
        db = PackageDb()
        base = db.base()
        env = {k: v for k, v in os.environ.items()
               if k != "LD_LIBRARY_PATH"}

        # deploy/Dockerfile against this build's binaries.
        listed, origins = stage_packages(stage, read_source)
        binaries, trees = shipped(stage)
        checks.check(binaries, "the runtime stage copies no binary from "
                               "/build")
        programs = []
        for b in binaries:
            local = os.path.join(args.build_dir, b[len("/build/"):])
            if checks.check(os.path.isfile(local),
                            f"the image ships {b}; this build has no "
                            f"{local}"):
                programs.append((os.path.basename(b), local))
        tree = os.path.dirname(os.path.realpath(args.torch_dir))
        print(f"deploy/Dockerfile runtime stage ({base_image}): "
              f"{len(listed)} packages from {describe(origins)}"
              f"; {len(base)} base packages (Essential or required); "
              f"binaries {', '.join(n for n, _ in programs)}; copied trees "
              f"{', '.join(trees)} (here {tree})")
        libs = Libraries(programs, tree, env)
        failures, lines = libs.evaluate(db, listed, base)
        print(f"{len(lines)} Debian libraries the binaries load, each "
              "with its package and why the image has it:")
        print("\n".join(lines))
        for f in failures:
            checks.check(False, "deploy/Dockerfile: " + f)
        needed = libs.needed_packages()
        unused = [p for p in listed if p not in needed]
        if unused:
            print("listed, owning none of these libraries (data, a "
                  "dependency's, or unused): " + ", ".join(unused))

        # The check must be able to fail. The package to drop: the first
        # listed one that a binary needs and nothing else installs.
        drop = None
        for p in listed:
            rest = [q for q in listed if q != p]
            if p in needed and p not in db.closure(rest + base):
                drop = p
                break
        if checks.check(drop, "self-check: no listed package is needed "
                              "alone, so dropping one cannot fail"):
            cases = []
            script = next((s.split(" ")[0] for s, _ in origins
                           if s and s.endswith(" runtime")), None)
            if script:
                def without_drop(path):
                    text = read_source(path)
                    if path != script:
                        return text
                    m = re.search(r"^runtime_pkgs=\([^)]*\)", text,
                                  re.MULTILINE)
                    body = re.sub(r"(?<![\w.+-])" + re.escape(drop) +
                                  r"(?![\w.+-])", "", m.group(0))
                    return text[:m.start()] + body + text[m.end():]
                cases.append((f"{script} without {drop}", dockerfile,
                              without_drop, False))

            def inline(packages):
                return re.sub(r"bash \S*install_deps\.sh runtime",
                              "apt-get install -y -q "
                              "--no-install-recommends " +
                              " ".join(packages), dockerfile)
            # Inline, the same list gives the Dockerfile's own verdict.
            cases.append(("the Dockerfile with the list inline",
                          inline(listed), read_source, not failures))
            cases.append((f"the Dockerfile with the list inline but {drop}",
                          inline([q for q in listed if q != drop]),
                          read_source, False))
            cases.append(("the Dockerfile installing nothing",
                          re.sub(r"bash \S*install_deps\.sh runtime",
                                 "true", dockerfile), read_source, False))
            for label, text, reader, should_pass in cases:
                _, variant = runtime_stage(text)
                pkgs, _ = stage_packages(variant, reader)
                got, _ = libs.evaluate(db, pkgs, base)
                if should_pass:
                    checks.check(not got, f"self-check: {label} must pass: "
                                          f"{got[:3]}")
                    print(f"self-check: {label} ({len(pkgs)} packages) "
                          "passes")
                elif label == "the Dockerfile with the list inline":
                    checks.equal(len(got), len(failures),
                                 f"self-check: failures of {label}")
                    print(f"self-check: {label} ({len(pkgs)} packages) "
                          f"fails as the Dockerfile does")
                else:
                    checks.check(got, f"self-check: {label} must fail")
                    example = first_failure_with(got, drop) or \
                        (got[0] if got else "")
                    print(f"self-check: {label} ({len(pkgs)} packages) "
                          f"fails as it must, {len(got)} failure(s), e.g. "
                          f"{example}")

        # deploy/Dockerfile.cuda: its package list against what this
        # build's binaries of the same names need, and against the CUDA
        # LibTorch's own needs when .venv holds that wheel.
        cuda_text = read_source("deploy/Dockerfile.cuda")
        cuda_base, cuda_stage = runtime_stage(cuda_text)
        checks.equal(cuda_base, base_image,
                     "Dockerfile.cuda's runtime base image")
        cuda_listed, cuda_origins = stage_packages(cuda_stage, read_source)
        cuda_binaries, cuda_trees = shipped(cuda_stage)
        by_name = dict(programs)
        missing = [b for b in cuda_binaries
                   if os.path.basename(b) not in by_name]
        checks.check(not missing, "Dockerfile.cuda ships binaries the CPU "
                                  f"image does not, unchecked: {missing}")
        cuda_programs = [(os.path.basename(b), by_name[os.path.basename(b)])
                         for b in cuda_binaries
                         if os.path.basename(b) in by_name]
        proxy = Libraries(cuda_programs, tree, env)
        got, _ = proxy.evaluate(db, cuda_listed, base)
        for f in got:
            checks.check(False, "deploy/Dockerfile.cuda (this build's "
                                "binaries of its names): " + f)
        print(f"deploy/Dockerfile.cuda runtime stage: {len(cuda_listed)} "
              f"packages from {describe(cuda_origins)}; its "
              f"binaries are a CUDA build, not made here: this build's "
              f"{', '.join(n for n, _ in cuda_programs)} checked against "
              f"its list: {'ok' if not got else f'{len(got)} failure(s)'}")
        cuda_torch = venv_torch_dir(args.venv_python)
        if cuda_torch and os.path.exists(
                os.path.join(cuda_torch, "lib", "libtorch_cuda.so")):
            cuda_tree = os.path.dirname(os.path.realpath(cuda_torch))
            torch_libs = [(n, os.path.join(cuda_torch, "lib", n))
                          for n in CUDA_TORCH_LIBS]
            cuda_libs = Libraries(torch_libs, cuda_tree, env,
                                  exempt=HOST_DRIVER)
            got, lines = cuda_libs.evaluate(db, cuda_listed, base)
            for f in got:
                checks.check(False, "deploy/Dockerfile.cuda (the CUDA "
                                    "LibTorch): " + f)
            print(f"the CUDA LibTorch of {cuda_torch} "
                  f"({', '.join(CUDA_TORCH_LIBS)}): {len(lines)} Debian "
                  f"libraries, {'all installed' if not got else 'failures'}"
                  f" by Dockerfile.cuda's list (copied trees "
                  f"{', '.join(cuda_trees)})")
        else:
            print("the CUDA LibTorch is not checked: no CUDA torch wheel in "
                  f"the venv of {args.venv_python!r}")
        checks.raise_if_failed()
    print("PASSED")


if __name__ == "__main__":
    du.run(main)

"""A PEP 517 build backend that needs nothing beyond the standard library.

pipefeed's wheel is its package directory, the pipe command beside it
(pipefeed/bin/pipe) and three metadata files, which zipfile writes. With no
build requirements, pip installs it without a network (no setuptools to
fetch into an isolated environment).

The pipe in the wheel is built from the Go module one directory up (this
checkout of pipe) with ``go build``, CGO_ENABLED=0: a statically linked
program that runs on any Linux of its architecture, so the wheel is tagged
py3-none-manylinux_2_17_<arch>, the architecture read from the program
itself (GOARCH=arm64 in the environment cross-compiles an aarch64 wheel).
pip's config settings choose otherwise:

    pip install ./python                                           # builds pipe with Go
    pip install --config-settings=pipe=/abs/path/to/pipe ./python  # carries that pipe (static, Linux)
    pip install --config-settings=pipe=none ./python               # no pipe: PIPE_BIN or PATH names one

Without Go (or outside a checkout) the build fails, saying so and what to
do, rather than install a package that cannot start its pipe: pip shows a
backend's output only when the build fails.
"""

import ast
import base64
import hashlib
import os
import shutil
import struct
import subprocess
import tarfile
import tempfile
import zipfile

NAME = "pipefeed"
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)  # the checkout of pipe whose pipe the wheel carries
MODULE = "github.com/pipefeed/pipe"
BIN = f"{NAME}/bin/pipe"  # where the wheel carries pipe; pipefeed._launch looks there


def _version():
    """The version, from pipefeed/__init__.py's __version__: the package's
    metadata is written once (pyproject.toml declares it dynamic)."""
    with open(os.path.join(HERE, NAME, "__init__.py")) as f:
        for line in f:
            if line.startswith("__version__ = "):
                return ast.literal_eval(line.split("=", 1)[1].strip())
    raise RuntimeError(f"{NAME}/__init__.py has no __version__ line")


def _project():
    """pyproject.toml's [project] table: name, description, requires-python,
    dependencies and optional-dependencies are written there alone. Its
    values are strings and lists of strings on one line each, which
    ast.literal_eval reads where tomllib (Python 3.11) is missing."""
    path = os.path.join(HERE, "pyproject.toml")
    try:
        import tomllib

        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    except ImportError:
        pass
    project, table = {}, None
    with open(path) as f:
        for line in f:
            line = line.split(" #", 1)[0].strip()
            if line.startswith("["):
                table = line.strip("[]")
            elif "=" in line and table in ("project", "project.optional-dependencies"):
                key, value = (x.strip() for x in line.split("=", 1))
                t = project if table == "project" else project.setdefault("optional-dependencies", {})
                t[key] = ast.literal_eval(value)
    return project


PROJECT = _project()
VERSION = _version()
PURE_TAG = "py3-none-any"
DIST = f"{NAME}-{VERSION}"

# The wheel's platform for each ELF machine pipe may be built for. A static
# Go program needs nothing of the C library, so the oldest manylinux tag
# pip knows by its PEP 600 name (glibc 2.17) claims no more than is true.
PLATFORMS = {62: "manylinux_2_17_x86_64", 183: "manylinux_2_17_aarch64"}  # EM_X86_64, EM_AARCH64


def _metadata():
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {VERSION}",
             f"Summary: {PROJECT['description']}", f"Requires-Python: {PROJECT['requires-python']}"]
    lines += [f"Requires-Dist: {d}" for d in PROJECT.get("dependencies", [])]
    for extra, deps in PROJECT.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    return "\n".join(lines) + "\n"


METADATA = _metadata()


def _wheel_file(tag):
    return f"""Wheel-Version: 1.0
Generator: pipefeed _build
Root-Is-Purelib: {"true" if tag == PURE_TAG else "false"}
Tag: {tag}
"""


class BuildError(Exception):
    """The wheel cannot be built as asked; the message says what to do."""


INSTEAD = (
    "Instead: install a wheel that carries pipe (in a checkout of pipe, on a machine with Go, "
    "scripts/wheel writes dist/pipefeed-*-manylinux_2_17_*.whl), or install pipefeed without pipe "
    "(pip install --config-settings=pipe=none ./python) and set PIPE_BIN to a pipe command."
)


def _build_pipe(out):
    """Builds pipe from the module at ROOT into out: CGO_ENABLED=0, so it is
    statically linked; GOARCH and the other go settings are the
    environment's."""
    try:
        with open(os.path.join(ROOT, "go.mod")) as f:
            module = f.readline().split()
    except OSError:
        module = []
    if module != ["module", MODULE]:
        raise BuildError(
            f"{ROOT} is not a checkout of pipe (its go.mod is not module {MODULE}): pipefeed's wheel carries "
            f"the pipe command, built with Go from the checkout {HERE} sits in. {INSTEAD}"
        )
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "pipefeed's wheel carries the pipe command, built with Go, and there is no go on PATH: install Go "
            f"(https://go.dev/doc/install) and build again. {INSTEAD}"
        )
    cmd = [go, "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/pipe"]
    done = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, CGO_ENABLED="0"), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise BuildError(f"CGO_ENABLED=0 {' '.join(cmd)} (in {ROOT}) failed, exit status {done.returncode}:\n"
                         f"{done.stderr.strip()}")


def _platform(path):
    """The wheel's platform tag for the pipe at path, which must be a
    statically linked 64-bit Linux program for a machine in PLATFORMS."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF":
            raise BuildError(f"{path} is not a Linux program (not an ELF file): pipefeed needs Linux")
        if head[4] != 2 or head[5] != 1 or head[7] not in (0, 3):  # ELFCLASS64, little-endian, SYSV or Linux ABI
            raise BuildError(f"{path} is not a 64-bit little-endian Linux program")
        machine, = struct.unpack_from("<H", head, 18)
        if machine not in PLATFORMS:
            raise BuildError(f"{path} is for ELF machine {machine}: pipefeed's wheel carries pipe for x86-64 "
                             "(GOARCH=amd64) or aarch64 (GOARCH=arm64)")
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            ptype, _, offset, _, _, size = struct.unpack("<IIQQQQ", f.read(40))
            if ptype == 3:  # PT_INTERP: the dynamic loader it needs
                f.seek(offset)
                interp = f.read(size).rstrip(b"\0").decode(errors="replace")
                raise BuildError(f"{path} is dynamically linked (it needs {interp}), so it runs only where its "
                                 "libraries are: the wheel carries a static pipe (CGO_ENABLED=0 go build)")
    return PLATFORMS[machine]


def _sources():
    pkg = os.path.join(HERE, NAME)
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            yield f"{NAME}/{name}", os.path.join(pkg, name)


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """The wheel's METADATA, without building pipe: pip asks for it before
    the wheel, which it would otherwise build twice."""
    info = f"{DIST}.dist-info"
    os.makedirs(os.path.join(metadata_directory, info))
    with open(os.path.join(metadata_directory, info, "METADATA"), "w") as f:
        f.write(METADATA)
    return info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Writes the wheel into wheel_directory and returns its file name.
    config_settings' "pipe" is the pipe to carry: unset, one built from
    ROOT with Go; a path, that program; "none", no pipe (a py3-none-any
    wheel)."""
    pipe = (config_settings or {}).get("pipe")
    if pipe is not None and not isinstance(pipe, str):
        raise BuildError(f"config setting pipe={pipe!r}: want one path, or none")
    if pipe == "none":
        return _write_wheel(wheel_directory, PURE_TAG, None)
    if pipe:
        if not os.path.isabs(pipe):
            raise BuildError(f"config setting pipe={pipe}: give an absolute path (pip builds in {HERE})")
        return _write_wheel(wheel_directory, f"py3-none-{_platform(pipe)}", pipe)
    with tempfile.TemporaryDirectory() as tmp:
        built = os.path.join(tmp, "pipe")
        _build_pipe(built)
        return _write_wheel(wheel_directory, f"py3-none-{_platform(built)}", built)


def _write_wheel(wheel_directory, tag, pipe):
    filename = f"{DIST}-{tag}.whl"
    info = f"{DIST}.dist-info"
    files = [(arc, open(path, "rb").read(), 0o644) for arc, path in _sources()]
    if pipe is not None:
        with open(pipe, "rb") as f:
            files.append((BIN, f.read(), 0o755))
    files += [(f"{info}/METADATA", METADATA.encode(), 0o644), (f"{info}/WHEEL", _wheel_file(tag).encode(), 0o644)]
    records = [_record_line(arc, data) for arc, data, _ in files] + [f"{info}/RECORD,,"]
    files.append((f"{info}/RECORD", ("\n".join(records) + "\n").encode(), 0o644))
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w") as whl:
        for arc, data, mode in files:
            # ZipInfo's date is 1980's, so the same inputs make the same
            # wheel; the mode is a regular file's, whose x bits pip keeps.
            entry = zipfile.ZipInfo(arc)
            entry.external_attr = (0o100000 | mode) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(entry, data)
    return filename


def build_sdist(sdist_directory, config_settings=None):
    """The Python package alone, without pipe's Go module: a wheel built
    from it needs --config-settings=pipe=PATH (or none)."""
    filename = f"{DIST}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as tar:
        for name in ["pyproject.toml", "_build.py"]:
            tar.add(os.path.join(HERE, name), f"{DIST}/{name}")
        for arc, path in _sources():
            tar.add(path, f"{DIST}/{arc}")
        pkg_info = os.path.join(sdist_directory, "PKG-INFO")
        with open(pkg_info, "w") as f:
            f.write(METADATA)
        tar.add(pkg_info, f"{DIST}/PKG-INFO")
        os.remove(pkg_info)
    return filename

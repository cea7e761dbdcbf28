"""The in-tree build backend: the wheel holds every module of the package,
metadata from the one place each field is written, and a statically linked
pipe tagged with its platform."""

import base64
import hashlib
import importlib.util
import os
import platform
import re
import shutil
import stat
import struct
import subprocess
import zipfile

import pytest

import pipefeed

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INFO = f"pipefeed-{pipefeed.__version__}.dist-info"


def _backend():
    spec = importlib.util.spec_from_file_location("_build", os.path.join(HERE, "_build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def elf(path, machine, interp=None):
    """Writes a 64-bit little-endian ELF header for machine (62 x86-64, 183
    aarch64) with one PT_LOAD, and a PT_INTERP naming interp if given: as
    much of a program as the backend reads."""
    phdrs = [struct.pack("<IIQQQQQQ", 1, 5, 0, 0x400000, 0x400000, 0, 0, 0x1000)]
    tail = b""
    if interp:
        tail = interp.encode() + b"\0"
        phdrs.insert(0, struct.pack("<IIQQQQQQ", 3, 4, 64 + 56 * 2, 0, 0, len(tail), len(tail), 1))
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    head = struct.pack("<16sHHIQQQIHHHHHH", ident, 2, machine, 1, 0x401000, 64, 0, 0, 64, 56, len(phdrs), 64, 0, 0)
    with open(path, "wb") as f:
        f.write(head + b"".join(phdrs) + tail)
    os.chmod(path, 0o755)
    return str(path)


def check_record(whl):
    """Every file of the wheel is in its RECORD with its sha256 and size,
    and nothing else is."""
    lines = whl.read(f"{INFO}/RECORD").decode().splitlines()
    assert f"{INFO}/RECORD,," in lines
    record = {}
    for line in lines:
        arc, digest, size = line.rsplit(",", 2)
        record[arc] = (digest, size)
    assert set(record) == set(whl.namelist())
    for arc in whl.namelist():
        if arc == f"{INFO}/RECORD":
            continue
        data = whl.read(arc)
        want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert record[arc] == (want, str(len(data))), arc


def test_wheel_holds_the_package_and_its_metadata(tmp_path):
    build = _backend()
    name = build.build_wheel(str(tmp_path), {"pipe": "none"})
    assert name == f"pipefeed-{pipefeed.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / name) as whl:
        files = set(whl.namelist())
        meta = whl.read(f"{INFO}/METADATA").decode()
        wheel = whl.read(f"{INFO}/WHEEL").decode()
        check_record(whl)
    modules = {f"pipefeed/{m}" for m in os.listdir(os.path.join(HERE, "pipefeed")) if m.endswith(".py")}
    assert {"pipefeed/_loader.py", "pipefeed/_protocol.py", "pipefeed/_ring.py"} <= modules <= files
    assert "pipefeed/bin/pipe" not in files
    assert "Root-Is-Purelib: true\n" in wheel and "Tag: py3-none-any\n" in wheel
    assert f"Version: {pipefeed.__version__}\n" in meta
    assert "Summary: PyTorch and JAX loaders" in meta and "Requires-Dist: numpy\n" in meta
    assert 'Requires-Dist: torch; extra == "torch"\n' in meta


@pytest.mark.parametrize("machine,arch", [(62, "x86_64"), (183, "aarch64")])
def test_platform_wheel_carries_pipe(tmp_path, machine, arch):
    build = _backend()
    pipe = elf(tmp_path / "pipe", machine)
    out = tmp_path / "dist"
    out.mkdir()
    name = build.build_wheel(str(out), {"pipe": pipe})
    tag = f"py3-none-manylinux_2_17_{arch}"
    assert name == f"pipefeed-{pipefeed.__version__}-{tag}.whl"
    with zipfile.ZipFile(out / name) as whl:
        check_record(whl)
        entry = whl.getinfo("pipefeed/bin/pipe")
        assert whl.read(entry) == open(pipe, "rb").read()
        mode = entry.external_attr >> 16
        assert stat.S_ISREG(mode) and stat.S_IMODE(mode) == 0o755
        assert stat.S_IMODE(whl.getinfo("pipefeed/_loader.py").external_attr >> 16) == 0o644
        wheel = whl.read(f"{INFO}/WHEEL").decode()
    assert "Root-Is-Purelib: false\n" in wheel and f"Tag: {tag}\n" in wheel
    again = tmp_path / "again"
    again.mkdir()
    build.build_wheel(str(again), {"pipe": pipe})
    assert (again / name).read_bytes() == (out / name).read_bytes(), "the same inputs made another wheel"


def test_only_a_static_linux_pipe_is_carried(tmp_path):
    build = _backend()
    cases = [
        (elf(tmp_path / "dynamic", 62, interp="/lib64/ld-linux-x86-64.so.2"),
         "is dynamically linked (it needs /lib64/ld-linux-x86-64.so.2)"),
        (elf(tmp_path / "riscv", 243), "is for ELF machine 243"),
        (shutil.copy(os.path.join(HERE, "_build.py"), tmp_path / "script"), "is not a Linux program (not an ELF file)"),
    ]
    for path, want in cases:
        with pytest.raises(build.BuildError, match=r".*".join(map(re.escape, [str(path), want]))):
            build.build_wheel(str(tmp_path), {"pipe": str(path)})
    with pytest.raises(build.BuildError, match="pipe=dynamic: give an absolute path"):
        build.build_wheel(str(tmp_path), {"pipe": "dynamic"})
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".whl")]


def test_without_go_the_build_says_what_to_do(tmp_path, monkeypatch):
    build = _backend()
    monkeypatch.setenv("PATH", str(tmp_path))  # no go
    with pytest.raises(build.BuildError) as err:
        build.build_wheel(str(tmp_path))
    msg = str(err.value)
    for want in ["there is no go on PATH", "https://go.dev/doc/install", "scripts/wheel",
                 "--config-settings=pipe=none", "PIPE_BIN"]:
        assert want in msg


def test_outside_a_checkout_the_build_says_what_to_do(tmp_path):
    build = _backend()
    build.ROOT = str(tmp_path)  # an sdist's directory: no go.mod of pipe's above it
    with pytest.raises(build.BuildError) as err:
        build.build_wheel(str(tmp_path))
    msg = str(err.value)
    assert f"{tmp_path} is not a checkout of pipe" in msg and "scripts/wheel" in msg and "PIPE_BIN" in msg


def test_wheel_built_with_go_carries_a_static_pipe(tmp_path):
    if shutil.which("go") is None:
        pytest.skip("no go on PATH to build pipe with")
    build = _backend()
    name = build.build_wheel(str(tmp_path))
    arch = {"x86_64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}[platform.machine()]
    assert name == f"pipefeed-{pipefeed.__version__}-py3-none-manylinux_2_17_{arch}.whl"
    with zipfile.ZipFile(tmp_path / name) as whl:
        check_record(whl)
        pipe = whl.extract("pipefeed/bin/pipe", tmp_path / "x")
        assert stat.S_IMODE(whl.getinfo("pipefeed/bin/pipe").external_attr >> 16) == 0o755
    os.chmod(pipe, 0o755)
    assert build._platform(pipe) == f"manylinux_2_17_{arch}"  # static: no PT_INTERP
    out = subprocess.run([pipe, "version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("pipe github.com/pipefeed/pipe")

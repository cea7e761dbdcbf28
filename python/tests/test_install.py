"""What an installed pipefeed starts: the pipe its wheel carries unless
PIPE_BIN (or pipe_bin=) says otherwise, and the README's example as it is
written."""

import ast
import os
import re
import subprocess
import sys

import pytest

import pipefeed
from pipefeed import _launch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CIFAR = os.path.join(REPO, "..", "shared", "data", "cifar10", "cifar-10-binary.tar.gz")

RECIPE = """source synthetic n=256 seed=3
batch 64
to_tensor layout=nchw dtype=uint8
"""


def program(path):
    with open(path, "w") as f:
        f.write("#!/bin/sh\n")
    os.chmod(path, 0o755)
    return str(path)


def test_pipe_bin_then_PIPE_BIN_then_the_bundled_pipe_then_PATH(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    (tmp_path / "path").mkdir()
    bundled = program(tmp_path / "bin" / "pipe")
    on_path = program(tmp_path / "path" / "pipe")
    monkeypatch.setattr(_launch, "BUNDLED", bundled)
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.setenv("PIPE_BIN", "/opt/pipe")

    assert _launch.find_pipe("/given/pipe") == "/given/pipe"
    assert _launch.find_pipe(None) == "/opt/pipe"
    monkeypatch.setenv("PIPE_BIN", "")  # set but empty: as if unset
    assert _launch.find_pipe(None) == bundled
    monkeypatch.delenv("PIPE_BIN")
    assert _launch.find_pipe(None) == bundled

    os.chmod(bundled, 0o644)  # a wheel unpacked without its modes
    with pytest.raises(PermissionError, match=re.escape(f"{bundled}, the pipe command pipefeed was installed with, "
                                                        "is not executable")):
        _launch.find_pipe(None)

    os.remove(bundled)  # installed with --config-settings=pipe=none
    assert _launch.find_pipe(None) == on_path
    os.remove(on_path)
    with pytest.raises(FileNotFoundError) as err:
        _launch.find_pipe(None)
    for want in ["installed without the pipe command", "scripts/wheel", "PIPE_BIN", "pipe_bin="]:
        assert want in str(err.value)


def test_loader_starts_the_bundled_pipe_when_PIPE_BIN_is_unset(write_pipe, monkeypatch):
    if not os.access(_launch.BUNDLED, os.X_OK):
        pytest.skip(f"this pipefeed ({os.path.dirname(pipefeed.__file__)}) carries no pipe: "
                    "install a wheel from scripts/wheel or pip install ./python")
    monkeypatch.delenv("PIPE_BIN", raising=False)
    with pipefeed.Loader(write_pipe(RECIPE), framework="numpy") as loader:
        exe = os.readlink(f"/proc/{loader._proc.pid}/exe")
        x, y = next(iter(loader))
        assert x.shape == (64, 3, 32, 32) and y.shape == (64,)
    assert exe == os.path.realpath(_launch.BUNDLED)


def readme_example():
    """The Python code block of the README's Python quick start, which
    docs/python.md repeats: the two must not drift apart."""
    with open(os.path.join(REPO, "README.md")) as f:
        readme = f.read()
    section = readme[readme.index("\n## Quick start: Python"):]
    section = section[:section.index("\n## ", 1)]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    with open(os.path.join(REPO, "docs", "python.md")) as f:
        guide = re.search(r"```python\n(.*?)```", f.read(), re.S).group(1)
    assert code == guide, "the README's Python example differs from docs/python.md's"
    return code


# The README's loop calls a model of the reader's: this one checks what
# the README says a batch is.
MODEL = """import torch
seen = []
def model(x):
    assert x.dtype == torch.float32 and tuple(x.shape[1:]) == (3, 32, 32), (x.dtype, x.shape)
    seen.append(x.shape[0])
    return torch.zeros(x.shape[0], 10)
"""


def test_readme_example_runs(tmp_path, pipe_bin):
    pytest.importorskip("torch")
    if not os.path.exists(CIFAR):
        pytest.skip(f"real data not available: {CIFAR} is absent (see ../shared/data/README.md)")
    code = readme_example()
    assert "range(30)" in code and '"examples/cifar.pipe"' in code and '"data/cifar-10-binary.tar.gz"' in code
    code = code.replace("range(30)", "range(1)")  # one epoch of the README's thirty
    os.symlink(os.path.join(REPO, "examples"), tmp_path / "examples")
    (tmp_path / "data").mkdir()
    os.symlink(os.path.realpath(CIFAR), tmp_path / "data" / "cifar-10-binary.tar.gz")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(pipefeed.__file__)))  # the pipefeed tested
    if pipe_bin != _launch.BUNDLED:
        env["PIPE_BIN"] = pipe_bin  # this pipefeed carries no pipe: the suite's
    done = subprocess.run([sys.executable, "-c", MODEL + code + "assert sum(seen) == 50000, sum(seen)\n"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    stats = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert stats["images"] == 50000 and stats["batches"] == 391

import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)


@pytest.fixture(scope="session")
def pipe_bin(tmp_path_factory):
    """The pipe command: $PIPE_BIN, else built from this repository."""
    if os.environ.get("PIPE_BIN"):
        return os.environ["PIPE_BIN"]
    go = shutil.which("go")
    if go is None:
        pytest.skip("neither PIPE_BIN nor go to build pipe with")
    out = str(tmp_path_factory.mktemp("bin") / "pipe")
    subprocess.run([go, "build", "-o", out, "./cmd/pipe"], cwd=REPO, check=True)
    return out


@pytest.fixture
def write_pipe(tmp_path):
    def write(body, name="t.pipe"):
        p = tmp_path / name
        p.write_text(body)
        return str(p)

    return write

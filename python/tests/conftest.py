import os
import shutil
import subprocess
import sys

import pytest

from pipefeed import _launch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)


@pytest.fixture(scope="session")
def pipe_bin(tmp_path_factory):
    """The pipe command: $PIPE_BIN, else the one the installed pipefeed
    carries, else built from this repository."""
    if os.environ.get("PIPE_BIN"):
        return os.environ["PIPE_BIN"]
    if os.access(_launch.BUNDLED, os.X_OK):
        return _launch.BUNDLED
    go = shutil.which("go")
    if go is None:
        pytest.skip("no PIPE_BIN, no pipe in the installed pipefeed, and no go to build pipe with")
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

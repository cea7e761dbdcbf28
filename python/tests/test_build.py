"""The in-tree build backend: the wheel holds every module of the package
and metadata from the one place each field is written."""

import importlib.util
import os
import zipfile

import pipefeed

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _backend():
    spec = importlib.util.spec_from_file_location("_build", os.path.join(HERE, "_build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_wheel_holds_the_package_and_its_metadata(tmp_path):
    build = _backend()
    name = build.build_wheel(str(tmp_path))
    assert name == f"pipefeed-{pipefeed.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / name) as whl:
        files = set(whl.namelist())
        meta = whl.read(f"pipefeed-{pipefeed.__version__}.dist-info/METADATA").decode()
    modules = {f"pipefeed/{m}" for m in os.listdir(os.path.join(HERE, "pipefeed")) if m.endswith(".py")}
    assert {"pipefeed/_loader.py", "pipefeed/_protocol.py", "pipefeed/_ring.py"} <= modules <= files
    assert f"Version: {pipefeed.__version__}\n" in meta
    assert "Summary: PyTorch and JAX loaders" in meta and "Requires-Dist: numpy\n" in meta
    assert 'Requires-Dist: torch; extra == "torch"\n' in meta

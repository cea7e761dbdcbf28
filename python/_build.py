"""A PEP 517 build backend that needs nothing beyond the standard library.

pipefeed is pure Python: its wheel is its package directory and three
metadata files, which zipfile writes. With no build requirements, pip installs
it without a network (no setuptools to fetch into an isolated environment).
"""

import base64
import hashlib
import os
import tarfile
import zipfile

NAME = "pipefeed"
VERSION = "0.1.0"
TAG = "py3-none-any"
DIST = f"{NAME}-{VERSION}"

METADATA = f"""Metadata-Version: 2.1
Name: {NAME}
Version: {VERSION}
Summary: PyTorch and JAX loaders fed by the pipe data pipeline over shared memory
Requires-Python: >=3.9
Requires-Dist: numpy
Provides-Extra: torch
Requires-Dist: torch; extra == "torch"
"""

WHEEL = f"""Wheel-Version: 1.0
Generator: pipefeed _build
Root-Is-Purelib: true
Tag: {TAG}
"""

HERE = os.path.dirname(os.path.abspath(__file__))


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


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    filename = f"{DIST}-{TAG}.whl"
    info = f"{DIST}.dist-info"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as whl:
        files = [(arc, open(path, "rb").read()) for arc, path in _sources()]
        files += [(f"{info}/METADATA", METADATA.encode()), (f"{info}/WHEEL", WHEEL.encode())]
        for arc, data in files:
            whl.writestr(arc, data)
            records.append(_record_line(arc, data))
        records.append(f"{info}/RECORD,,")
        whl.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
    return filename


def build_sdist(sdist_directory, config_settings=None):
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

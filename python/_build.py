"""A PEP 517 build backend that needs nothing beyond the standard library.

pipefeed is pure Python: its wheel is its package directory and three
metadata files, which zipfile writes. With no build requirements, pip installs
it without a network (no setuptools to fetch into an isolated environment).
"""

import ast
import base64
import hashlib
import os
import tarfile
import zipfile

NAME = "pipefeed"
HERE = os.path.dirname(os.path.abspath(__file__))


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
TAG = "py3-none-any"
DIST = f"{NAME}-{VERSION}"


def _metadata():
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {VERSION}",
             f"Summary: {PROJECT['description']}", f"Requires-Python: {PROJECT['requires-python']}"]
    lines += [f"Requires-Dist: {d}" for d in PROJECT.get("dependencies", [])]
    for extra, deps in PROJECT.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    return "\n".join(lines) + "\n"


METADATA = _metadata()

WHEEL = f"""Wheel-Version: 1.0
Generator: pipefeed _build
Root-Is-Purelib: true
Tag: {TAG}
"""


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

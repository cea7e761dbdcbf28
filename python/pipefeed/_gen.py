"""Generates ``_stages.py``, Pipeline's stage methods, from pipe's registry:

    cd python && PIPE_BIN=/path/to/pipe python3 -m pipefeed._gen > pipefeed/_stages.py

It runs ``pipe stages --json`` (``--pipe-bin`` or ``PIPE_BIN``, else
``PATH``, names pipe) and writes the module to stdout: the registry's data
(``STAGES``: pipe's JSON as it printed it) and a method per stage, with the
stage's parameters as arguments, type hints from their types and a
docstring from their docs. The tests compare: Python's run this on the pipe
they are given, cmd/pipe's compare ``STAGES`` with the registry; a stage or
parameter missing on either side (``drift``), or any other difference,
fails until the module is generated again.
"""

import argparse
import json
import keyword
import subprocess
import sys

from ._launch import find_pipe

REGENERATE = "cd python && PIPE_BIN=/path/to/pipe python3 -m pipefeed._gen > pipefeed/_stages.py"
"""How to regenerate the module, for the messages that say it is stale."""


def registry(pipe_bin=None):
    """pipe's registry: the text ``pipe stages --json`` prints, a JSON list
    of specs (name, kind, doc, params)."""
    return subprocess.run([find_pipe(pipe_bin), "stages", "--json"], check=True, capture_output=True,
                          text=True, encoding="utf-8", stdin=subprocess.DEVNULL).stdout


def drift(ours, pipes):
    """The stages and parameters one registry has and the other lacks, by
    kind and name: a list of lines, empty where both have the same."""
    def index(specs):
        return {(s["kind"], s["name"]): [p["name"] for p in s["params"]] for s in specs}

    a, b = index(ours), index(pipes)
    lines = []
    for key in sorted(a.keys() | b.keys()):
        label = " ".join(key) if key[0] == "source" else key[1]
        if key not in b:
            lines.append(f"{label}: a stage pipe does not have")
        elif key not in a:
            lines.append(f"{label}: a stage of pipe's that pipefeed does not have")
        else:
            lines += [f"{label}: parameter {p} that pipe does not have" for p in a[key] if p not in b[key]]
            lines += [f"{label}: parameter {p} of pipe's that pipefeed does not have" for p in b[key] if p not in a[key]]
    return lines


def _number(f):
    return str(int(f)) if float(f).is_integer() else repr(f)


def _type(p):
    """The parameter's type as ``pipe stages`` writes it."""
    t = "|".join(p["enum"]) if p["type"] == "enum" else p["type"]
    return t + "|auto" if p["auto"] else t


def _hint(p):
    hint = {
        "int": "int",
        "float": "float",
        "bool": "bool",
        "string": "Union[str, os.PathLike]",
        "floats": "Union[float, Sequence[float]]",
    }.get(p["type"])
    if p["type"] == "enum":
        hint = "Literal[" + ", ".join(json.dumps(e) for e in p["enum"]) + "]"
    if p["auto"]:
        hint = f'Union[{hint}, Literal["auto"]]'
    return f"Optional[{hint}]"


def _doc_text(s):
    return s.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def _param_doc(p, indent):
    head = f"{p['name']}: {_type(p)}"
    if p["required"]:
        head += " (required)"
    elif p["default"] is not None:
        head += f" = {p['default']}"
    if p["min"] is not None or p["max"] is not None:
        lo = "" if p["min"] is None else _number(p["min"])
        hi = "" if p["max"] is None else _number(p["max"])
        head += f" in [{lo}, {hi}]"
    if p["positional"]:
        head += " [positional]"
    lines = [head, "    " + p["doc"]]
    if p["why"]:
        lines.append(f"    (at most {_number(p['max'])}: {p['why']})")
    return "".join(f"{indent}{_doc_text(line)}\n" for line in lines)


def _check_names(specs):
    """Refuse names a method or an argument cannot have."""
    from ._pipeline import OVERRIDES, Pipeline

    reserved = [n for n in vars(Pipeline) if not n.startswith("_") and n not in OVERRIDES]
    for s in specs:
        if not s["name"].isidentifier() or keyword.iskeyword(s["name"]):
            raise SystemExit(f"pipefeed._gen: stage {s['name']!r} is not a Python name")
        if s["kind"] == "stage" and (s["name"] in reserved or s["name"].startswith("_")):
            raise SystemExit(f"pipefeed._gen: stage {s['name']!r} clashes with Pipeline.{s['name']}")
        for p in s["params"]:
            if not p["name"].isidentifier() or keyword.iskeyword(p["name"]) or p["name"] in ("self", "name", "unknown"):
                raise SystemExit(f"pipefeed._gen: {s['name']}'s parameter {p['name']!r} cannot be a Python argument")


def _signature(params, lead):
    """The arguments of a method: lead, the positional parameters, then the
    others keyword-only; every one defaults to None (not written)."""
    args = list(lead)
    pos = [p for p in params if p["positional"]]
    args += [f"{p['name']}: {_hint(p)} = None" for p in pos]
    rest = [p for p in params if not p["positional"]]
    if rest:
        args.append("*")
    args += [f"{p['name']}: {_hint(p)} = None" for p in rest]
    return args


def render(registry_json):
    """The text of ``_stages.py`` for the registry: the text of ``pipe
    stages --json``, which the module holds as it is, in a raw string."""
    specs = json.loads(registry_json)
    _check_names(specs)
    if "'''" in registry_json:
        raise SystemExit("pipefeed._gen: the registry's JSON holds ''', which ends the raw string it goes in")
    out = [
        '"""The stages of pipe\'s registry as Pipeline methods, and their specs.\n',
        "\n",
        "Generated from ``pipe stages --json`` by ``python -m pipefeed._gen``: do\n",
        "not edit; generate it again (see _gen) when pipe's stages change.\n",
        '"""\n',
        "\n",
        "from __future__ import annotations\n",
        "\n",
        "import json\n",
        "import os\n",
        "from typing import Any, Literal, Optional, Sequence, TypeVar, Union, overload\n",
        "\n",
        '_P = TypeVar("_P", bound="Stages")\n',
        "\n",
        "STAGES = json.loads(r'''\n",
        registry_json,
        "''')\n",
        '"""pipe\'s registry, as ``pipe stages --json`` printed it."""\n',
        "\n",
        "\n",
        "class Stages:\n",
        '    """Pipeline\'s methods: one per stage of pipe\'s registry, and source."""\n',
    ]
    sources = [s for s in specs if s["kind"] == "source"]
    for s in sources:
        args = _signature(s["params"], ["self: _P", f"name: Literal[{json.dumps(s['name'])}]"])
        out += ["\n", "    @overload\n", f"    def source({', '.join(args)}) -> _P: ...\n"]
    out += [
        "\n",
        "    def source(self: _P, name: str, *args: Any, **params: Any) -> _P:\n",
        '        """The data: source NAME and its parameters, the first line of a\n',
        "        pipeline. The sources:\n",
        "\n",
    ]
    for s in sources:
        out.append(f"        {s['name']}: {_doc_text(s['doc'])}\n")
        out += [_param_doc(p, " " * 12) for p in s["params"]]
        out.append("\n")
    out += ['        """\n', "        return self._source(name, args, params)\n"]
    for s in specs:
        if s["kind"] != "stage":
            continue
        args = _signature(s["params"], ["self: _P"]) + ["**unknown: Any"]
        given = ", ".join(f"{p['name']!r}: {p['name']}" for p in s["params"])
        out += [
            "\n",
            f"    def {s['name']}({', '.join(args)}) -> _P:\n",
            f'        """{_doc_text(s["doc"])}\n',
            "\n",
            f"        The .pipe stage {s['name']}; an argument left None is not written.\n",
        ]
        if s["params"]:
            out += ["\n", "        Args:\n"] + [_param_doc(p, " " * 12) for p in s["params"]]
        out += ['        """\n', f"        return self._stage({s['name']!r}, {{{given}{', ' if given else ''}**unknown}})\n"]
    return "".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m pipefeed._gen",
                                 description="write _stages.py, generated from pipe stages --json, to stdout")
    ap.add_argument("--pipe-bin", help="the pipe command (default $PIPE_BIN, else pipe on PATH)")
    a = ap.parse_args(argv)
    sys.stdout.buffer.write(render(registry(a.pipe_bin)).encode("utf-8"))


if __name__ == "__main__":
    main()

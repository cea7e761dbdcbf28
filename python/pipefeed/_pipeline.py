"""Pipelines built in Python: Pipeline, whose methods (one per stage of
pipe's registry, generated into _stages) write the .pipe text pipe reads."""

import difflib
import numbers
import os
import subprocess
import tempfile

import numpy as np

from ._errors import PipeError
from ._launch import find_pipe
from ._stages import STAGES, Stages

_SPECS = {(s["kind"], s["name"]): s for s in STAGES}

FIELDS = ("image", "mask", "boxes", "classes", "label", "labels", "tokens", "tensor")
"""The fields stage's fields (the kinds of pipe's package fields): each is a
parameter that may be written as its name alone."""

OVERRIDES = ("fields",)
"""The stage methods Pipeline writes over the generated ones, calling them."""

_BARE = object()
"""A value _stage writes as the parameter's name alone ("fields image")."""


def _names(kind):
    return [s["name"] for s in STAGES if s["kind"] == kind]


def _suggest(word, candidates):
    """The candidate nearest word where one is close enough to be a typo."""
    near = difflib.get_close_matches(word, candidates, n=1)
    return near[0] if near else None


class Pipeline(Stages):
    """A pipeline built in Python, with the stages, names and parameters of
    a .pipe file, one method a stage::

        p = (pipefeed.Pipeline()
             .source("cifar10", path="data/cifar-10-binary.tar.gz")
             .shuffle(42)
             .random_crop(32, pad=4, fill="reflect")
             .flip("horizontal", p=0.5)
             .batch(256)
             .to_tensor(dtype="float32"))
        with pipefeed.Loader(p) as loader:
            ...

    Each method adds one line and returns a new Pipeline: the one it is
    called on is unchanged, so pipelines can share a start. The methods and
    their arguments are generated from ``pipe stages --json`` (with its
    types as hints and its docs as docstrings), and a parameter left None is
    not written: pipe gives it its default. A stage or parameter pipe does
    not have raises at once, ``AttributeError`` or ``TypeError``, naming
    the nearest one (``random_crop: unknown parameter 'padd' (did you mean
    'pad'?)``); values are pipe's to check, in ``check()`` or as the Loader
    starts, which raise ``PipeError`` with pipe's message naming the line,
    stage and parameter, as for a file.

    ``str(p)`` is the .pipe text, a stage a line. Values are written as the
    file wants them: True and False as true and false, a list, tuple or
    array as comma-separated numbers, a path as its string, a string with a
    space, tab or ``#`` in double quotes; a ``${VAR}`` in a string is
    expanded by pipe, as in a file, from the environment (``env=``). A
    value cannot hold a double quote or a line break: ValueError.
    """

    def __init__(self):
        self._lines = ()

    def __str__(self):
        return "".join(line + "\n" for line in self._lines)

    def __repr__(self):
        return f"<pipefeed.Pipeline: {' | '.join(self._lines) or 'no stages'}>"

    def __getattr__(self, name):
        # Only names the class lacks get here: a stage pipe does not have.
        if name.startswith("_"):
            raise AttributeError(name)
        msg = f"Pipeline has no stage {name!r}"
        near = _suggest(name, _names("stage") + ["source"])
        if near:
            msg += f" (did you mean {near!r}?)"
        elif name in _names("source"):
            msg += f" (sources are written .source({name!r}, ...))"
        else:
            msg += " (`pipe stages` lists them)"
        raise AttributeError(msg)

    def fields(self, *names, **params):
        """The fields every sample carries, right after the source: each of
        ``names`` read from the source's default key for it and written as
        its name alone, a field given as ``name=KEY`` read from KEY, and the
        stage's settings by name::

            p.fields("image", "label", "labels", "tokens", num_labels=10)
            # fields image label labels tokens num_labels=10
            p.fields("image", "label", mask="mask.png", mask_dtype="uint16")

        A Loader of a pipeline with fields yields each batch as a dict
        keyed by field name (see Loader). A name that is not a field raises
        ``TypeError``, naming the nearest.

        """
        for n in names:
            if n not in FIELDS:
                near = _suggest(str(n), FIELDS)
                raise TypeError(f"fields: {n!r} is not a field (one of {', '.join(FIELDS)})"
                                + (f" (did you mean {near!r}?)" if near else ""))
            if n in params:
                raise TypeError(f"fields: {n} given twice")
        return super().fields(**{n: _BARE for n in names}, **params)

    # The generated method's doc, the stage's parameters, follows (none in
    # a _stages.py generated before pipe had the stage, until _gen runs).
    fields.__doc__ += getattr(getattr(Stages, "fields", None), "__doc__", None) or ""

    def _source(self, name, args, params):
        if ("source", name) not in _SPECS:
            msg = f"unknown source {name!r}"
            near = _suggest(name, _names("source"))
            if near:
                msg += f" (did you mean {near!r}?)"
            else:
                msg += " (one of " + ", ".join(_names("source")) + ")"
            raise ValueError(msg)
        spec = _SPECS[("source", name)]
        positional = [p["name"] for p in spec["params"] if p["positional"]]
        if len(args) > len(positional):
            raise TypeError(f"source {name}: {len(args)} values without a name, and it takes "
                            f"{len(positional)} ({', '.join(positional) or 'none'}): write name=value")
        given = dict(params)
        for p, v in zip(positional, args):
            if p in given:
                raise TypeError(f"source {name}: {p} given twice")
            given[p] = v
        return self._stage(name, given, kind="source")

    def _stage(self, name, given, kind="stage"):
        """A new pipeline, with the line of stage name and the values given
        (None: not written) added."""
        spec = _SPECS[(kind, name)]
        label = f"source {name}" if kind == "source" else name
        names = [p["name"] for p in spec["params"]]
        for key in given:
            if key not in names:
                msg = f"{label}: unknown parameter {key!r}"
                near = _suggest(key, names)
                if near:
                    msg += f" (did you mean {near!r}?)"
                elif names:
                    msg += " (it takes " + ", ".join(names) + ")"
                else:
                    msg += " (it takes no parameters)"
                raise TypeError(msg)
        words = ["source", name] if kind == "source" else [name]
        named = []
        # A bare value goes to the first positional parameter not yet
        # given: positional values are written bare while every one before
        # them is, and by name after one that is not.
        bare = True
        for p in spec["params"]:
            v = given.get(p["name"])
            if v is None:
                if p["required"]:
                    raise TypeError(f"{label}: required parameter {p['name']} missing: {p['doc']}")
                bare = bare and not p["positional"]
                continue
            if v is _BARE:
                named.append(p["name"])
                continue
            text = _quote(_value(f"{label}: {p['name']}", v))
            if p["positional"] and bare and "=" not in text:
                words.append(text)
            else:
                bare = bare and not p["positional"]
                named.append(f"{p['name']}={text}")
        out = Pipeline.__new__(type(self))
        out._lines = self._lines + (" ".join(words + named),)
        return out

    def check(self, *, env=None, pipe_bin=None):
        """Run ``pipe check`` on the pipeline: pipe parses it, opens its data
        and checks the stages' order and parameters, as for a file, and runs
        nothing. Returns what pipe prints (the plan); raises ``PipeError``
        with pipe's message where it refuses the pipeline, naming the line
        (of ``str(self)``), stage and parameter. ``env`` adds variables for
        ``${VAR}``s, ``pipe_bin`` names pipe as the Loader's does."""
        path = self._write()
        try:
            r = subprocess.run([find_pipe(pipe_bin), "check", path], capture_output=True, text=True,
                               stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
        finally:
            os.unlink(path)
        if r.returncode != 0:
            msg = r.stderr.strip().replace(path, "pipeline")
            raise PipeError(msg[len("pipe: "):] if msg.startswith("pipe: ") else msg or
                            f"pipe check exited with status {r.returncode} and said nothing")
        return r.stdout

    def _write(self):
        """Write the text to a new temporary .pipe file for pipe to read, and
        return its path: the caller removes it."""
        fd, path = tempfile.mkstemp(prefix="pipeline-", suffix=".pipe")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(str(self))
        return path


def _value(where, v):
    """v as a .pipe value, unquoted."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        return repr(float(v))
    if isinstance(v, os.PathLike):
        v = os.fspath(v)
    if isinstance(v, str):
        if any(c in v for c in '\n\r'):
            raise ValueError(f"{where}: {v!r}: a .pipe value cannot hold a line break")
        return v
    if isinstance(v, (list, tuple, np.ndarray)) and all(isinstance(x, numbers.Real) for x in v):
        return ",".join(_value(where, x) for x in v)
    raise TypeError(f"{where}: a {type(v).__name__} is not a .pipe value "
                    "(a number, bool, string, path, or a list of numbers)")


def _quote(text):
    """text as a .pipe word: quoted where a space, tab, # or quote would cut
    it, each quote doubled (two quotes inside quotes are one of the value)."""
    if text == "" or any(c in text for c in ' \t#"'):
        return '"' + text.replace('"', '""') + '"'
    return text

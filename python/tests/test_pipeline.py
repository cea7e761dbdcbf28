"""pipefeed.Pipeline: generated from pipe's registry without drift, written
as the .pipe text pipe reads, checked by pipe, and fed through the Loader
as a file is."""

import copy
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
import typing

import numpy as np
import pytest

import pipefeed
from pipefeed import _gen, _stages
from pipefeed._pipeline import Pipeline

from test_loader import recipe, stream


def test_stages_are_pipes(pipe_bin):
    """The checked-in _stages.py is what _gen makes of this pipe's
    registry: the same stages and parameters, fields and methods."""
    text = _gen.registry(pipe_bin)
    pipes = json.loads(text)
    missing = _gen.drift(_stages.STAGES, pipes)
    assert not missing, "pipefeed's stages and pipe's differ:\n" + "\n".join(missing) + "\nregenerate: " + _gen.REGENERATE
    assert _stages.STAGES == pipes, "a stage's doc, or a parameter's type, default or doc, changed: " + _gen.REGENERATE
    with open(_stages.__file__, encoding="utf-8") as f:
        assert f.read() == _gen.render(text), "_stages.py is not _gen's output: " + _gen.REGENERATE


def test_drift_names_what_either_side_lacks():
    ours = copy.deepcopy(_stages.STAGES)
    pipes = copy.deepcopy(_stages.STAGES)
    assert _gen.drift(ours, pipes) == []
    crop = next(s for s in pipes if s["name"] == "random_crop")
    crop["params"] = [p for p in crop["params"] if p["name"] != "fill"]
    pipes = [s for s in pipes if s["name"] != "flip"]
    ours = [s for s in ours if s["name"] != "synthetic"]
    assert _gen.drift(ours, pipes) == [
        "source synthetic: a stage of pipe's that pipefeed does not have",
        "flip: a stage pipe does not have",
        "random_crop: parameter fill that pipe does not have",
    ]
    crop["params"].append(dict(crop["params"][0], name="padding"))
    assert "random_crop: parameter padding of pipe's that pipefeed does not have" in _gen.drift(ours, pipes)


def test_methods_from_the_specs():
    """Each stage is a method with its parameters as arguments (positional
    ones first), type hints from their types and its docs."""
    sig = inspect.signature(Pipeline.random_crop)
    assert list(sig.parameters) == ["self", "size", "pad", "fill", "unknown"]
    assert sig.parameters["size"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert sig.parameters["pad"].kind is inspect.Parameter.KEYWORD_ONLY
    hints = typing.get_type_hints(Pipeline.random_crop)
    assert hints["fill"] == typing.Optional[typing.Literal["zero", "reflect", "edge", "wrap"]]
    assert hints["size"] == typing.Optional[int]
    assert typing.get_type_hints(Pipeline.pipeline)["workers"] == typing.Optional[typing.Union[int, typing.Literal["auto"]]]
    assert "side of the square crop in pixels" in Pipeline.random_crop.__doc__
    assert "pad: int = 0 in [0, 32768]" in Pipeline.random_crop.__doc__
    assert "workers: int|auto = auto" in Pipeline.pipeline.__doc__
    assert "CIFAR-10 binary distribution" in Pipeline.source.__doc__
    for s in _stages.STAGES:
        if s["kind"] == "stage":
            assert s["doc"] in getattr(Pipeline, s["name"]).__doc__


def test_text():
    base = Pipeline().source("synthetic", n=100, seed=3)
    p = (base.shuffle(11).random_crop(size=32, pad=4, fill="reflect").flip(p=0.25)
         .normalize(mean=[0.5, 0.25, np.float32(0.125)], std=(0.25,)).batch(np.int64(10), drop_last=True)
         .pipeline(workers="auto", on_error="skip").to_tensor(dtype="float16"))
    assert str(p) == (
        "source synthetic n=100 seed=3\n"
        "shuffle 11\n"
        "random_crop 32 pad=4 fill=reflect\n"
        "flip p=0.25\n"
        "normalize mean=0.5,0.25,0.125 std=0.25\n"
        "batch 10 drop_last=true\n"
        "pipeline workers=auto on_error=skip\n"
        "to_tensor dtype=float16\n"
    )
    assert str(base) == "source synthetic n=100 seed=3\n", "a method changed the pipeline it was called on"
    assert str(Pipeline()) == ""
    # Quoted where a space, tab or # would cut the word; a path as its
    # string; ${VAR} as written, for pipe to expand; a value with "=" by
    # name, and the positional ones after it too.
    q = (Pipeline().source("webdataset", path=tempfile.gettempdir() + "/my shards/#1-{0..9}.tar", label_field="")
         .flip(direction="a=b").flip(None, p=0.5).shuffle(seed="${SEED}"))
    assert str(q).splitlines() == [
        f'source webdataset path="{tempfile.gettempdir()}/my shards/#1-{{0..9}}.tar" label_field=""',
        "flip direction=a=b",
        "flip p=0.5",
        "shuffle ${SEED}",
    ]


def test_fields_stage():
    """fields mirrors the stage: a field named alone is written alone (read
    from the source's default key), one given a key as name=KEY, the
    settings by name, in the stage's order; a name that is not a field, or
    one given twice, raises at once."""
    base = Pipeline().source("synthetic", n=10)
    p = base.fields("image", "labels", "label", "tokens", num_labels=10, tensor="npy", tensor_shape=(2, 3))
    assert str(p).splitlines()[1] == "fields image label labels tokens tensor=npy num_labels=10 tensor_shape=2,3"
    assert str(base.fields("image", mask="mask.png", mask_dtype="uint16")).splitlines()[1] == \
        "fields image mask=mask.png mask_dtype=uint16"
    with pytest.raises(TypeError, match=r"'imag' is not a field .*did you mean 'image'"):
        base.fields("imag")
    with pytest.raises(TypeError, match="image given twice"):
        base.fields("image", image="jpg")
    with pytest.raises(TypeError, match="did you mean 'num_labels'"):
        base.fields("image", num_label=3)
    assert "max_tokens" in Pipeline.fields.__doc__, "the generated method's doc follows fields' own"


def test_text_is_what_pipe_reads(pipe_bin, tmp_path):
    """str() parses back: pipe check reads the text, every value as given."""
    (tmp_path / "my data").mkdir()
    p = (Pipeline().source("synthetic", n=64, split="test", shuffle_labels=False).shuffle("${SEED}", buffer=0)
         .random_resized_crop(24, scale=(0.5, 1), ratio=[0.75, 4 / 3], interpolation="bicubic")
         .color_jitter(brightness=0.25).cache(dir=tmp_path / "my data" / "c#1", epochs=2)
         .normalize(mean=0.5, std=[0.25, 0.5, 0.125]).batch(16).to_tensor(layout="nhwc"))
    plan = p.check(pipe_bin=pipe_bin, env={"SEED": "7"})
    assert "source synthetic n=64 split=test seed=0 shuffle_labels=false" in plan
    assert "shuffle seed=7 buffer=0" in plan
    assert "random_resized_crop size=24 scale=0.5,1 ratio=0.75,1.3333333333333333 interpolation=bicubic" in plan
    assert "normalize mean=0.5 std=0.25,0.5,0.125 where=host" in plan
    assert f'cache dir="{tmp_path}/my data/c#1" epochs=2' in plan
    assert "output   nhwc float32 [16 24 24 3]" in plan


def test_loader_of_a_pipeline_is_the_files(pipe_bin, write_pipe, tmp_path, monkeypatch):
    """Loader(pipeline) streams the batches of the same .pipe file, byte for
    byte, with the same fingerprint, and leaves no file behind."""
    path = write_pipe(recipe(n=300, batch=32))
    p = (Pipeline().source("synthetic", n=300, seed=3).shuffle(seed=11).random_crop(32, pad=4, fill="reflect")
         .flip("horizontal").normalize(mean=0.5, std=0.25).batch(32).to_tensor(layout="nchw", dtype="float32"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    os.mkdir(tempfile.tempdir)
    with pipefeed.Loader(path, framework="numpy", pipe_bin=pipe_bin) as a, \
            pipefeed.Loader(p, framework="numpy", pipe_bin=pipe_bin) as b:
        assert os.listdir(tempfile.tempdir) == [], "the pipeline's file outlived pipe's start"
        assert b.info["fingerprint"] == a.info["fingerprint"]
        assert len(b) == len(a) == 10
        for epoch in (0, 1):
            a.set_epoch(epoch)
            b.set_epoch(epoch)
            want = stream(a)
            assert stream(b) == want and len(want[1]) == 4 * 300, f"epoch {epoch}"


def test_unknown_names_raise_at_once():
    p = Pipeline().source("synthetic")
    with pytest.raises(AttributeError, match=r"Pipeline has no stage 'random_crp' \(did you mean 'random_crop'\?\)"):
        p.random_crp(32)
    with pytest.raises(AttributeError, match=r"no stage 'cifar10' \(sources are written \.source\('cifar10', \.\.\.\)\)"):
        p.cifar10(path="x")
    with pytest.raises(ValueError, match=r"unknown source 'cifar1O' \(did you mean 'cifar10'\?\)"):
        Pipeline().source("cifar1O")
    with pytest.raises(TypeError, match=r"random_crop: unknown parameter 'padd' \(did you mean 'pad'\?\)"):
        p.random_crop(32, padd=4)
    with pytest.raises(TypeError, match=r"flip: unknown parameter 'zzz' \(it takes direction, p\)"):
        p.flip(zzz=1)
    with pytest.raises(TypeError, match=r"source synthetic: unknown parameter 'sed' \(did you mean 'seed'\?\)"):
        Pipeline().source("synthetic", sed=1)
    with pytest.raises(TypeError, match=r"random_crop: required parameter size missing: side of the square crop"):
        p.random_crop(pad=4)
    with pytest.raises(TypeError, match=r"batch: size: a dict is not a \.pipe value"):
        p.batch({})
    with pytest.raises(ValueError, match=r"source cifar10: path: 'a\\nb': a \.pipe value cannot hold a line break"):
        Pipeline().source("cifar10", path="a\nb")
    assert str(Pipeline().source("cifar10", path='my "best" data')).startswith('source cifar10 path="my ""best"" data"')
    assert not hasattr(p, "_private"), "a private name is a plain AttributeError"


def test_bad_values_are_refused_by_pipe_naming_the_parameter(pipe_bin, tmp_path, monkeypatch):
    """pipe checks the values: check() and the Loader raise its message,
    which names the line (of str(pipeline), called "pipeline", not the
    temporary file pipe read), stage and parameter, as for a file; the
    pipeline's file is gone after either, as after a pipe that cannot
    start."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    p = Pipeline().source("synthetic", n=100).random_crop(32, pad=-1).batch(10)
    with pytest.raises(pipefeed.PipeError, match=r"^pipeline:2:16: random_crop: pad: -1 must be at least 0$"):
        p.check(pipe_bin=pipe_bin)
    with pytest.raises(pipefeed.PipeError, match=r"^pipeline:2:16: random_crop: pad: -1 must be at least 0"):
        pipefeed.Loader(p, pipe_bin=pipe_bin, framework="numpy")
    with pytest.raises(FileNotFoundError, match="cannot start"):
        pipefeed.Loader(p, pipe_bin=str(tmp_path / "no-pipe"), framework="numpy")
    assert os.listdir(tmp_path) == []
    flip = Pipeline().source("synthetic").flip("horizonal").batch(10)
    with pytest.raises(pipefeed.PipeError, match=r"flip: direction: \"horizonal\" is not one of horizontal, vertical "
                                                 r"\(did you mean \"horizontal\"\?\)"):
        flip.check(pipe_bin=pipe_bin)
    with pytest.raises(pipefeed.PipeError, match=r"no batch stage"):
        Pipeline().source("synthetic").check(pipe_bin=pipe_bin)


def test_the_pipe_command_names_it(pipe_bin):
    """_gen's command line: the module on stdout, from the pipe it names."""
    out = subprocess.run([sys.executable, "-m", "pipefeed._gen",
                          "--pipe-bin", pipe_bin], check=True, capture_output=True, text=True).stdout
    with open(_stages.__file__, encoding="utf-8") as f:
        assert out == f.read()
    assert re.search(r"^    def random_crop\(self: _P, size: Optional\[int\] = None, \*, pad", out, re.M)

"""pipefeed's messages against feed/testdata/messages.txt, the protocol byte
for byte, which Go's tests (feed/protocol_test.go) check pipe's side
against: the two sides cannot drift apart."""

import json
import os
import struct

import pytest

import pipefeed
from pipefeed import _protocol

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "feed", "testdata", "messages.txt")

_KINDS = {"u32": "I", "u64": "Q", "i64": "q", "f64": "d", "b8": "8s"}

# The message (or header) each of this package's layouts is for, and the
# type constant it is sent with.
_LAYOUTS = {
    "hello": (_protocol.HEAD, _protocol.HELLO),
    "start": (_protocol.START_MSG, _protocol.START),
    "batch": (_protocol.BATCH_MSG, _protocol.BATCH),
    "release": (_protocol.RELEASE_MSG, _protocol.RELEASE),
    "end": (_protocol.END_HEAD, _protocol.END),
    "stop": (_protocol.HEAD, _protocol.STOP),
    "error": (_protocol.HEAD, _protocol.ERROR),
    "ring": (_protocol.HEADER, None),
}


def read_golden():
    """The protocol version and the blocks of messages.txt: dicts with kind,
    name, fields [(name, kind, example)], hex (bytes) and keys."""
    version, blocks = None, []
    with open(GOLDEN) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            word, _, rest = line.partition(" ")
            w = rest.split()
            if word == "protocol" and len(w) == 1:
                version = int(w[0])
            elif (word == "message" and len(w) == 2) or (word == "header" and len(w) == 1):
                blocks.append({"kind": word, "name": w[0], "fields": [], "hex": None, "keys": {}})
            elif blocks and word == "field" and len(w) >= 3:
                name, _, after = rest.partition(" ")
                kind, _, value = after.strip().partition(" ")
                blocks[-1]["fields"].append((name, kind, value.strip()))
            elif blocks and word == "hex":
                blocks[-1]["hex"] = bytes.fromhex("".join(w))
            elif blocks and word == "keys" and len(w) >= 2:
                blocks[-1]["keys"][w[0]] = w[1:]
            else:
                raise AssertionError(f"messages.txt:{n}: cannot read {line!r}")
    return version, blocks


def _value(kind, text):
    if kind == "f64":
        return float(text)
    if kind in ("b8", "rest"):
        return text.encode()
    return int(text)


def test_protocol_version():
    version, _ = read_golden()
    assert version == _protocol.PROTOCOL


@pytest.mark.parametrize("name", sorted(_LAYOUTS))
def test_message_bytes(name):
    """This package's layout of each message is the file's, field for field,
    and writes and reads the file's example byte for byte."""
    _, blocks = read_golden()
    (g,) = [b for b in blocks if b["name"] == name]
    layout, typ = _LAYOUTS[name]
    fixed = [(f, k, v) for f, k, v in g["fields"] if k != "rest"]
    rest = [v for _, k, v in g["fields"] if k == "rest"]
    assert layout.format == "<" + "".join(_KINDS[k] for _, k, _ in fixed), f"{name}: fields {g['fields']}"
    values = [_value(k, v) for _, k, v in fixed]
    if typ is not None:
        assert g["fields"][0][0] == "type" and values[0] == typ
    tail = rest[0].encode() if rest else b""
    assert layout.pack(*values) + tail == g["hex"]
    assert list(layout.unpack_from(g["hex"])) == values
    assert g["hex"][layout.size:] == tail


def test_every_message_is_described():
    _, blocks = read_golden()
    assert sorted(b["name"] for b in blocks) == sorted(_LAYOUTS)


def test_hello_keys():
    """Every key of hello's JSON the loader reads is one pipe sends."""
    _, blocks = read_golden()
    (hello,) = [b for b in blocks if b["name"] == "hello"]
    assert set(_protocol.HELLO_KEYS) <= set(hello["keys"]["hello"])
    assert set(_protocol.RING_KEYS) <= set(hello["keys"]["ring"])
    assert set(_protocol.FIELDS_KEYS) <= set(hello["keys"]["fields"])
    assert set(_protocol.REGION_KEYS) <= set(hello["keys"]["region"])


def test_hello_fields_keys_are_checked():
    """A hello whose fields lack a key the loader reads is refused, naming
    it, rather than failing later on a missing key."""
    ring = {k: 1 for k in _protocol.RING_KEYS}
    h = dict({k: 1 for k in _protocol.HELLO_KEYS}, ring=ring,
             fields={"names": ["image", "tokens"], "offset": 0,
                     "regions": [{"kind": "tokens", "dtype": "int32", "shape": [4], "offset": 0}]})
    data = _protocol.HEAD.pack(_protocol.HELLO, _protocol.PROTOCOL) + json.dumps(h).encode()
    with pytest.raises(pipefeed.PipeError, match="lacks counts"):
        _protocol.read_hello(data, [3], "pipe")
    h["fields"]["regions"][0]["counts"] = 64
    assert _protocol.read_hello(_protocol.HEAD.pack(_protocol.HELLO, _protocol.PROTOCOL) + json.dumps(h).encode(),
                                [3], "pipe") == h

"""The feed protocol's messages, as Go's package feed writes and reads them.

Every message is one SOCK_SEQPACKET packet, little-endian, starting with its
type as a uint32. Both sides' tests check these layouts against the golden
bytes of feed/testdata/messages.txt; docs/python.md tells
the conversation.
"""

import json
import struct

from ._errors import PipeError

PROTOCOL = 3
"""The feed protocol version this package speaks; pipe refuses another."""

MAGIC = b"PIPEFEED"

HELLO, START, BATCH, RELEASE, END, STOP, ERROR = 1, 2, 3, 4, 5, 6, 7
HEAD = struct.Struct("<II")  # hello, stop and error: the type and a uint32
START_MSG = struct.Struct("<IIqq")  # token, epoch, first batch
BATCH_MSG = struct.Struct("<IIIIQqqqd")  # slab, token, 0, seq, epoch, index, n, slab wait
RELEASE_MSG = struct.Struct("<IIQ")  # slab, the seq of its batch
END_HEAD = struct.Struct("<IIq")  # token, epoch; JSON follows
HEADER = struct.Struct("<8sIIQQQQQ")  # the ring's: magic, version, slabs, stride, offset, rows, sample bytes, labels

# The keys of hello's JSON (and of its ring) that the loader reads.
HELLO_KEYS = ("shape", "layout", "dtype", "batches", "samples", "rank", "world", "seed", "ahead", "fingerprint",
              "ring")
RING_KEYS = ("size", "slabs", "stride")
# … and of its fields (present where the pipeline has a fields stage) and
# their regions.
FIELDS_KEYS = ("names", "offset", "regions")
REGION_KEYS = ("kind", "dtype", "shape", "offset", "counts")


def start(token, epoch, first):
    """The message that starts epoch at batch first, under token."""
    return START_MSG.pack(START, token, epoch, first)


def release(slab, seq):
    """The message that hands slab back, holding batch seq."""
    return RELEASE_MSG.pack(RELEASE, slab, seq)


def stop():
    """The message that stops the running epoch; pipe takes every slab back."""
    return HEAD.pack(STOP, 0)


def kind(data):
    """The type of message data."""
    return HEAD.unpack_from(data)[0]


def error_text(data):
    """The text of an error message."""
    return data[HEAD.size:].decode(errors="replace")


def read_batch(data):
    """A batch message's slab, token, seq, epoch, index, n and slab wait."""
    _, slab, token, _, seq, epoch, index, n, wait = BATCH_MSG.unpack_from(data)
    return slab, token, seq, epoch, index, n, wait


def read_end(data):
    """An end message's token, epoch and figures (pipe's JSON)."""
    _, token, epoch = END_HEAD.unpack_from(data)
    return token, epoch, json.loads(data[END_HEAD.size:])


def read_hello(data, fds, binary):
    """The JSON of pipe's first message, data (with fds attached), or
    PipeError: pipe's own, or about a hello this package cannot read.
    binary names the command, for the error when it is not pipe."""
    typ, version = HEAD.unpack_from(data)
    if typ == ERROR:
        raise PipeError(error_text(data))
    if typ != HELLO or not fds:
        raise PipeError(f"pipe feed sent message type {typ} where the hello belongs: is {binary} pipe?")
    if version != PROTOCOL:
        raise PipeError(f"pipe speaks feed protocol {version} and pipefeed speaks {PROTOCOL}: install the pipe and pipefeed of one release")
    h = json.loads(data[HEAD.size:])
    missing = [k for k in HELLO_KEYS if k not in h] + [k for k in RING_KEYS if k not in h.get("ring", {})]
    if h.get("fields") is not None:
        missing += [k for k in FIELDS_KEYS if k not in h["fields"]]
        missing += [k for r in h["fields"].get("regions", ()) for k in REGION_KEYS if k not in r]
    if missing:
        raise PipeError(f"pipe's hello lacks {', '.join(missing)}: install the pipe and pipefeed of one release")
    return h

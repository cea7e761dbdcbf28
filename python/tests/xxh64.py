"""XXH64 in pure Python, to compare a loader's stream with `pipe bench
--checksum` (which hashes the data bytes and the int32 labels with XXH64
and combines the two). Slow (a few MB/s): for the small test pipelines."""

import struct

P1 = 0x9E3779B185EBCA87
P2 = 0xC2B2AE3D27D4EB4F
P3 = 0x165667B19E3779F9
P4 = 0x85EBCA77C2B2AE63
P5 = 0x27D4EB2F165667C5
M = (1 << 64) - 1


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M


def _round(acc, lane):
    acc = (acc + lane * P2) & M
    return (_rotl(acc, 31) * P1) & M


def _merge(acc, val):
    acc ^= _round(0, val)
    return (acc * P1 + P4) & M


def xxh64(data, seed=0):
    data = memoryview(data).cast("B")
    n = len(data)
    i = 0
    if n >= 32:
        v1, v2, v3, v4 = (seed + P1 + P2) & M, (seed + P2) & M, seed, (seed - P1) & M
        lanes = struct.unpack_from(f"<{(n // 32) * 4}Q", data)
        for k in range(0, len(lanes), 4):
            v1 = _rotl((v1 + lanes[k] * P2) & M, 31) * P1 & M
            v2 = _rotl((v2 + lanes[k + 1] * P2) & M, 31) * P1 & M
            v3 = _rotl((v3 + lanes[k + 2] * P2) & M, 31) * P1 & M
            v4 = _rotl((v4 + lanes[k + 3] * P2) & M, 31) * P1 & M
        i = (n // 32) * 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & M
        for v in (v1, v2, v3, v4):
            h = _merge(h, v)
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while i + 8 <= n:
        (lane,) = struct.unpack_from("<Q", data, i)
        h ^= _round(0, lane)
        h = (_rotl(h, 27) * P1 + P4) & M
        i += 8
    if i + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, i)
        h ^= (lane * P1) & M
        h = (_rotl(h, 23) * P2 + P3) & M
        i += 4
    while i < n:
        h ^= (data[i] * P5) & M
        h = (_rotl(h, 11) * P1) & M
        i += 1
    h ^= h >> 33
    h = (h * P2) & M
    h ^= h >> 29
    h = (h * P3) & M
    h ^= h >> 32
    return h


def pipe_checksum(data, labels_int32):
    """pipe's Checksum.String of a stream: data bytes and int32 labels."""
    combined = struct.pack(">QQ", xxh64(data), xxh64(labels_int32))
    return "%016x" % xxh64(combined)

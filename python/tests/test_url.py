"""pipefeed passes a .pipe file to pipe, so a source path that is a URL
works through it as through pipe: shards served over HTTP give pipe's
stream of the same files on disk."""

import functools
import http.server
import os
import shutil
import threading

import pytest

import pipefeed
from conftest import REPO
from test_loader import bench_sums, stream
from xxh64 import pipe_checksum

SHARD = os.path.join(os.path.dirname(REPO), "shared", "data", "webdataset", "sample.tgz")

BODY = """decode
shuffle seed=5
random_crop size=24
flip horizontal
batch 16
to_tensor layout=nchw dtype=float32
"""


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def test_http_shards_through_pipefeed(pipe_bin, write_pipe, tmp_path):
    if not os.path.exists(SHARD):
        pytest.skip(f"real data not available: {SHARD} is absent (see ../shared/data/README.md)")
    served = tmp_path / "served"
    served.mkdir()
    for i in range(2):
        shutil.copy(SHARD, served / f"shard-{i}.tgz")
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(served)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/shard-{{0..1}}.tgz"
        local = write_pipe(f'source webdataset path="{served}/shard-{{0..1}}.tgz"\n' + BODY, "local.pipe")
        remote = write_pipe(f'source webdataset path="{url}" cache_dir={tmp_path / "cache"}\n' + BODY, "url.pipe")
        want = bench_sums(pipe_bin, local, 2)
        with pipefeed.Loader(remote, framework="numpy", pipe_bin=pipe_bin) as loader:
            for epoch in range(2):
                loader.set_epoch(epoch)
                data, labels = stream(loader)
                assert len(labels) == 4 * 180
                assert pipe_checksum(data, labels) == want[epoch], f"epoch {epoch}"
    finally:
        srv.shutdown()
        srv.server_close()

"""A private S3 endpoint for tests and benchmarks: moto's server on loopback.

``with s3_server() as s3:`` starts moto's S3 API on 127.0.0.1 at a free port,
creates the bucket ``s3.bucket``, and stops everything on exit;
``s3.storage_options`` is what ``carray.open``/``carray.carray`` (and s3fs)
need to talk to it as to AWS.  Nothing leaves the machine.  moto, its server
and s3fs come with the ``s3test`` extra (``pip install 'carray[s3test]'``, or
``all``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class S3Endpoint:
    """A running S3 API: its URL, a bucket in it, and the options to reach it."""

    endpoint_url: str
    bucket: str
    storage_options: dict = field(default_factory=dict)

    def url(self, key: str) -> str:
        """``s3://bucket/key``."""
        return f"s3://{self.bucket}/{key.lstrip('/')}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _options(endpoint_url: str) -> dict:
    return {"key": "testing", "secret": "testing", "token": None,
            "client_kwargs": {"endpoint_url": endpoint_url, "region_name": "us-west-2"},
            "config_kwargs": {"retries": {"max_attempts": 2}}}


def _wait_until_listening(port: int, proc: subprocess.Popen | None, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"moto server exited with code {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"moto server did not listen on 127.0.0.1:{port} in {timeout} s")


@contextlib.contextmanager
def s3_server(bucket: str = "carray-test", *, process: bool = False,
              timeout: float = 30.0) -> Iterator[S3Endpoint]:
    """Run moto's S3 server on 127.0.0.1 for the duration of the ``with`` block.

    Parameters
    ----------
    bucket : str
        A bucket to create up front.
    process : bool
        Serve from a child process (so the server does not share this process's
        interpreter lock; what benchmarks want) instead of a thread.
    """
    try:
        import moto.server  # noqa: F401 - fail early with the real reason when missing
        import s3fs  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"s3_server needs moto[s3], flask, flask-cors and s3fs ({exc}): "
                          "pip install 'carray[s3test]'") from exc

    os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    port = _free_port()
    server = proc = None
    if process:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request else

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
    try:
        _wait_until_listening(port, proc, timeout)
        endpoint = f"http://127.0.0.1:{port}"
        options = _options(endpoint)
        import s3fs

        fs = s3fs.S3FileSystem(**options)
        fs.mkdir(bucket)
        yield S3Endpoint(endpoint, bucket, options)
    finally:
        if server is not None:
            server.stop()
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

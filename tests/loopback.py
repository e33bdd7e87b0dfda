"""Serving a test's stand-in HTTP server on 127.0.0.1 in a background thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer


@contextmanager
def serving(httpd: ThreadingHTTPServer) -> Iterator[None]:
    """Answer requests until the block ends, then shut the server down and free its port."""
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        httpd.shutdown()
        httpd.server_close()

"""One verifying TLS context per process for specmon's HTTP clients.

httpx builds a new SSL context, loading the whole CA bundle, for every client it creates (~50-90
ms each on a 2-core machine): a session start made at least two (identifying the server, the
/metrics scraper) before it could show the server `up`. They now share one context built the
same way as httpx's default (`httpx.create_ssl_context()`: certificates and host names verified,
`SSL_CERT_FILE` / `SSL_CERT_DIR` honoured), built once per value of those two variables.
"""

from __future__ import annotations

import functools
import os
import ssl

import httpx


def verifying_context() -> ssl.SSLContext:
    """The shared verifying context for the CA bundle the environment names now."""
    return _context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    del cert_file, cert_dir  # the cache key: httpx reads the same variables
    return httpx.create_ssl_context()

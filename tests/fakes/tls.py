"""TLS for the downloader's tests: a self-signed certificate for the name ``images.test`` only (no IP address in
it) and the image server behind it.

Fixtures: ``tls_files`` (``(key.pem, cert.pem)``; skipped without ``openssl``) and ``tls_server`` (an
:class:`~tests.fakes.image_server.ImageServer` speaking HTTPS with that certificate). A client trusts it with
``ssl.create_default_context(cafile=cert)`` and reaches it as ``images.test`` by resolving that name to
127.0.0.1 (monkeypatch ``cultura.curate.safety.resolve_host``).
"""
from __future__ import annotations

import shutil
import ssl
import subprocess

import pytest

from tests.fakes.image_server import ImageServer

#: The only name the test certificate is valid for.
TLS_NAME = "images.test"


@pytest.fixture
def tls_files(tmp_path):
    """A self-signed certificate for :data:`TLS_NAME` only, and its key."""
    if not shutil.which("openssl"):
        pytest.skip("openssl is needed to make a test certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                    f"/CN={TLS_NAME}", "-addext", f"subjectAltName=DNS:{TLS_NAME}", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True)
    return key, cert


@pytest.fixture
def tls_server(tls_files):
    """The image server over HTTPS with the certificate of :func:`tls_files`."""
    key, cert = tls_files
    srv = ImageServer()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv._httpd.socket = ctx.wrap_socket(srv._httpd.socket, server_side=True)
    with srv:
        yield srv

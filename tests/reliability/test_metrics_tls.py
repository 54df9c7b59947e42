"""The metrics endpoint's exposure: loopback by default, TLS and mutual TLS as prometheus_client offers them.

A throwaway CA, server certificate (for 127.0.0.1) and client certificate are made at test time.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from otelstream import config
from otelstream.export import build_pipeline

x509 = pytest.importorskip("cryptography.x509")
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: E402


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _cert(
    subject: str, key: Any, issuer: str, issuer_key: Any, *, ca: bool = False, server: bool = False
) -> Any:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        ).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    elif not ca:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, cert: Any, key: Any | None = None) -> None:
    path.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        path.with_suffix(".key").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    ca_key, server_key, client_key = _key(), _key(), _key()
    ca = _cert("otelstream test CA", ca_key, "otelstream test CA", ca_key, ca=True)
    _write(d / "ca", ca)
    _write(d / "server", _cert("127.0.0.1", server_key, "otelstream test CA", ca_key, server=True), server_key)
    _write(d / "client", _cert("scraper", client_key, "otelstream test CA", ca_key), client_key)
    return d


@pytest.fixture
def serve() -> Iterator[Any]:
    """Start otelstream's metrics server with the given options; shut everything down afterwards."""
    started: list[Any] = []
    pipeline = build_pipeline(config.load(), registry=CollectorRegistry())

    def start(**kwargs: Any) -> int:
        server, thread = pipeline.start_metrics_server(0, **kwargs)
        started.append((server, thread))
        assert server.server_address[0] == "127.0.0.1"  # never every interface unless asked
        return int(server.server_port)

    yield start
    for server, thread in started:
        server.shutdown()
        server.server_close()
        thread.join(5)
    pipeline.shutdown()


def _get(url: str, context: ssl.SSLContext | None = None) -> str:
    with urllib.request.urlopen(url, timeout=5, context=context) as response:
        body: bytes = response.read()
        return body.decode()


def _client_context(pki: Path, *, with_cert: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if with_cert:
        ctx.load_cert_chain(str(pki / "client.crt"), str(pki / "client.key"))
    return ctx


def test_binds_loopback_by_default(serve: Any) -> None:
    port = serve()
    assert "otelstream_streams_total" in _get(f"http://127.0.0.1:{port}/metrics")


def test_tls(serve: Any, pki: Path) -> None:
    port = serve(certfile=str(pki / "server.crt"), keyfile=str(pki / "server.key"))
    body = _get(f"https://127.0.0.1:{port}/metrics", _client_context(pki, with_cert=False))
    assert "otelstream_streams_total" in body
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        _get(f"http://127.0.0.1:{port}/metrics")  # plain HTTP to a TLS port gets no metrics


def test_mutual_tls_requires_a_client_certificate(serve: Any, pki: Path) -> None:
    port = serve(
        certfile=str(pki / "server.crt"),
        keyfile=str(pki / "server.key"),
        client_cafile=str(pki / "ca.crt"),
        client_auth_required=True,
    )
    url = f"https://127.0.0.1:{port}/metrics"
    assert "otelstream_streams_total" in _get(url, _client_context(pki, with_cert=True))
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError)):
        _get(url, _client_context(pki, with_cert=False))

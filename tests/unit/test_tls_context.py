"""sources.tls: the HTTP clients of a session share one verifying TLS context (loading the CA
bundle once per process instead of once per client shortened every session's start), without
verifying any less, and a CA bundle named later by SSL_CERT_FILE is still honoured."""

from __future__ import annotations

import ssl

from specmon.sources.tls import verifying_context


def test_one_context_shared_and_it_verifies(monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    ctx = verifying_context()
    assert verifying_context() is ctx
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert ctx.check_hostname is True
    assert ctx.cert_store_stats()["x509_ca"] > 0


def test_a_bundle_named_later_gets_its_own_context(monkeypatch, tmp_path):
    import certifi

    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    default = verifying_context()
    bundle = tmp_path / "ca.pem"
    bundle.write_text(certifi.contents(), encoding="ascii")
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    assert verifying_context() is not default

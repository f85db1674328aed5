"""Files read again when they change (gateway.apimachinery.dynamicfile), and the union the
authentication ConfigMap is written from (gateway.controllers.authconfig): what the
end-to-end rotation tests rely on, case by case."""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

import pytest
import structlog
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID

from gateway.apimachinery.dynamicfile import FileContent, FileContentError, FileWatcher
from gateway.auth.authn.x509 import CABundle, parse_ca_bundle
from gateway.controllers.authconfig import auth_configmap_data
from gateway.options import ServeOptions
from tests.support.certs import Issuer, new_key, pem


def _bump(path: Path, data: bytes, stamp: int) -> None:
    """Write ``data`` in place with a modification time of its own (coarse clocks)."""
    path.write_bytes(data)
    os.utime(path, ns=(stamp, stamp))


def _content(path: Path) -> FileContent[bytes]:
    def parse(raw: list[bytes]) -> bytes:
        if not raw[0].startswith(b"good"):
            raise ValueError("not good")
        return raw[0]

    return FileContent(f"--thing {path}", [path], parse)


def test_a_change_is_taken_and_listeners_told(tmp_path: Path) -> None:
    path = tmp_path / "f"
    _bump(path, b"good 1", 1)
    content = _content(path)
    heard: list[bytes] = []
    content.on_change(heard.append)
    assert content.check() is False  # nothing changed
    _bump(path, b"good 2", 2)
    assert content.check() is True
    assert (content.value, content.generation, heard) == (b"good 2", 1, [b"good 2"])


def test_a_bad_change_keeps_the_last_good_content_and_is_reported_once(tmp_path: Path) -> None:
    path = tmp_path / "f"
    _bump(path, b"good 1", 1)
    content = _content(path)
    with structlog.testing.capture_logs() as logs:
        _bump(path, b"garbage", 2)
        assert content.check() is False
        assert content.check() is False  # the same status: not read again
        assert content.check(reread=True) is False  # the same bytes: not reported again
    assert content.value == b"good 1" and content.generation == 0
    refusals = [e for e in logs if e["event"].startswith("a changed file does not load")]
    assert len(refusals) == 1 and refusals[0]["content"] == f"--thing {path}"
    assert refusals[0]["log_level"] == "error"
    _bump(path, b"good 3", 3)  # the write finishes
    assert content.check() is True and content.value == b"good 3"


def test_a_rewrite_that_keeps_the_status_is_found_by_the_periodic_reread(tmp_path: Path) -> None:
    path = tmp_path / "f"
    _bump(path, b"good 1", 1)
    content = _content(path)
    inode = path.stat().st_ino
    with open(path, "r+b") as out:  # same size, same inode, same time
        out.write(b"good 2")
    os.utime(path, ns=(1, 1))
    assert path.stat().st_ino == inode
    assert content.check() is False
    assert content.check(reread=True) is True and content.value == b"good 2"


def test_a_pair_is_taken_only_when_both_halves_agree(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _bump(a, b"1", 1)
    _bump(b, b"1", 1)

    def parse(raw: list[bytes]) -> tuple[bytes, bytes]:
        if raw[0] != raw[1]:
            raise ValueError("halves differ")
        return raw[0], raw[1]

    content = FileContent("pair", [a, b], parse)
    _bump(a, b"2", 2)
    assert content.check() is False  # half-way
    _bump(b, b"2", 2)
    assert content.check() is True and content.value == (b"2", b"2")


def test_a_file_that_does_not_load_at_start_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"garbage")
    with pytest.raises(FileContentError, match=r"--thing .*: not good"):
        _content(tmp_path / "f")
    with pytest.raises(FileContentError, match="No such file"):
        _content(tmp_path / "missing")


def test_a_file_gone_for_a_moment_keeps_the_content(tmp_path: Path) -> None:
    path = tmp_path / "f"
    _bump(path, b"good 1", 1)
    watcher = FileWatcher()
    content = _content(path)
    watcher.watch(content, content, None)
    assert watcher.contents == [content]
    path.unlink()
    watcher.check_all()
    assert content.value == b"good 1"
    _bump(path, b"good 2", 2)
    watcher.check_all()
    assert content.value == b"good 2"


# -- the authentication ConfigMap's union ------------------------------------------------------


def _bundle(*cas: Issuer) -> CABundle:
    return parse_ca_bundle(b"".join(pem(ca.cert) for ca in cas))


def _ders(bundle: str) -> list[bytes]:
    return [c.public_bytes(serialization.Encoding.DER)
            for c in x509.load_pem_x509_certificates(bundle.encode())]


def _der(ca: Issuer) -> bytes:
    return ca.cert.public_bytes(serialization.Encoding.DER)


def _expired_ca() -> Issuer:
    key = new_key()
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "expired")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now - datetime.timedelta(days=2))
            .not_valid_after(now - datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return Issuer(cert, key)


def test_the_configmap_holds_the_union_of_old_and_new() -> None:
    options = ServeOptions(requestheader_username_headers=["X-Remote-User"],
                           requestheader_allowed_names=["front-proxy"])
    old, new, front, expired = Issuer.new("old"), Issuer.new("new"), Issuer.new("fp"), \
        _expired_ca()
    first = auth_configmap_data(options, _bundle(old), _bundle(front))
    assert _ders(first["client-ca-file"]) == [_der(old)]
    assert first["requestheader-username-headers"] == '["X-Remote-User"]'  # as Go writes it
    assert first["requestheader-uid-headers"] == "[]"

    existing = {**first, "client-ca-file": first["client-ca-file"] + pem(expired.cert).decode(),
                "requestheader-allowed-names": '["another-proxy"]'}
    rotated = auth_configmap_data(options, _bundle(new), _bundle(front), existing)
    # the old CA stays beside the new one; the long-expired one goes; each CA once
    assert _ders(rotated["client-ca-file"]) == [_der(old), _der(new)]
    assert _ders(rotated["requestheader-client-ca-file"]) == [_der(front)]
    assert json.loads(rotated["requestheader-allowed-names"]) == ["another-proxy", "front-proxy"]
    # a value that does not parse is replaced by this gateway's
    broken = auth_configmap_data(options, _bundle(new), None,
                                 {"client-ca-file": "garbage", "requestheader-group-headers": "{"})
    assert _ders(broken["client-ca-file"]) == [_der(new)]
    assert "requestheader-client-ca-file" not in broken


def test_an_unforeseen_parser_error_does_not_stop_the_watching(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _bump(a, b"good 1", 1)
    _bump(b, b"good 1", 1)

    def parse(raw: list[bytes]) -> bytes:
        if raw[0] == b"boom":
            raise RuntimeError("a parser's bug")
        return raw[0]

    fragile, steady = FileContent("fragile", [a], parse), _content(b)
    watcher = FileWatcher()
    watcher.watch(fragile, steady)
    _bump(a, b"boom", 2)
    _bump(b, b"good 2", 2)
    with structlog.testing.capture_logs() as logs:
        watcher.check_all()
    assert fragile.value == b"good 1" and steady.value == b"good 2"
    assert [e["content"] for e in logs if e["log_level"] == "error"] == ["fragile"]


# -- --tls-sni-cert-key ---------------------------------------------------------------------


def test_sni_cert_key_values_parse_as_kube_parses_them() -> None:
    from gateway.options import NamedCertKey, OptionsError, parse_named_cert_key

    assert parse_named_cert_key("a.crt,a.key") == NamedCertKey(Path("a.crt"), Path("a.key"))
    assert parse_named_cert_key(" a.crt , a.key : *.foo.com, foo.com") == NamedCertKey(
        Path("a.crt"), Path("a.key"), ("*.foo.com", "foo.com"))
    for bad, words in (("a.crt", "expected comma separated certificate and key file paths"),
                       ("a.crt,a.key,b", "expected comma separated"),
                       ("a.crt,a.key:", "empty names list is not allowed")):
        with pytest.raises(OptionsError, match=words):
            parse_named_cert_key(bad)


def test_a_certificates_own_names_leave_out_ip_addresses() -> None:
    from gateway.server.tls import certificate_names
    from tests.support.certs import certificate

    ca = Issuer.new("ca")
    by_ip = certificate("10.0.0.1", new_key(), ca, sans=("a.example", "10.0.0.2"))
    by_name = certificate("*.b.example", new_key(), ca)
    assert certificate_names(pem(by_ip)) == ["a.example"]
    assert certificate_names(pem(by_name)) == ["*.b.example"]

"""Who is asking: every identity kind kube-apiserver knows, driven by kubectl and raw HTTPS,
and the hostile clients that must get 401 or have their claims ignored."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest

from tests.support.api import expect_status
from tests.support.gateway import GatewayProcess, token_gateway
from tests.support.identity import (
    ClientCert,
    client_cert,
    https,
    resigned_token,
    stranger_key_pem,
    token_kubeconfig,
    whoami,
)

pytestmark = pytest.mark.slow

TOKENS = 'alice-token,alice,uid-alice,"devs,qa"\nbob-token,bob,uid-bob\n'
UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "Unauthorized", "reason": "Unauthorized", "code": 401}


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    with token_gateway(tmp_path_factory.mktemp("authn"), TOKENS,
                       "--requestheader-allowed-names", "front-proxy-client") as proc:
        yield proc


def _kubectl_as(gw: GatewayProcess, kubeconfig: Path, *args: str, check: bool = True):
    return gw.kubectl("--kubeconfig", str(kubeconfig), *args, check=check)


def _whoami_table(output: str) -> dict[str, str]:
    rows = [line.split(None, 1) for line in output.splitlines()[1:] if line.strip()]
    return {key: value.strip() for key, value in rows}


def _forbidden(answer: tuple[int, Any, dict[str, str]], message: str) -> None:
    """``answer`` (from ``https``) is kube's 403 Status with exactly ``message``."""
    expect_status(answer[:2], 403, "Forbidden", message=message)


def _sa_token(gw: GatewayProcess, name: str, namespace: str = "default") -> str:
    gw.kubectl("create", "serviceaccount", name, "-n", namespace)
    return gw.kubectl("create", "token", name, "-n", namespace).stdout.strip()


# -- the identity kinds, as kubectl users see them ---------------------------------------


def test_admin_certificate_is_a_cluster_admin(gw: GatewayProcess) -> None:
    table = _whoami_table(gw.kubectl("auth", "whoami").stdout)
    assert table["Username"] == "admin"
    assert table["Groups"] == "[system:masters system:authenticated]"
    assert gw.kubectl("auth", "can-i", "delete", "namespaces").stdout.strip() == "yes"


def test_token_file_user_is_who_the_file_says(gw: GatewayProcess, tmp_path: Path) -> None:
    config = token_kubeconfig(gw, tmp_path / "alice.kubeconfig", "alice-token")
    table = _whoami_table(_kubectl_as(gw, config, "auth", "whoami").stdout)
    assert table["Username"] == "alice"
    assert table["UID"] == "uid-alice"
    assert table["Groups"] == "[devs qa system:authenticated]"
    denied = _kubectl_as(gw, config, "get", "configmaps", check=False)
    assert denied.returncode == 1
    assert denied.stderr == (
        'Error from server (Forbidden): configmaps is forbidden: User "alice" cannot list '
        'resource "configmaps" in API group "" in the namespace "default"\n')


def test_service_account_token_from_kubectl_create_token(gw: GatewayProcess,
                                                          tmp_path: Path) -> None:
    token = _sa_token(gw, "robot")
    config = token_kubeconfig(gw, tmp_path / "robot.kubeconfig", token)
    table = _whoami_table(_kubectl_as(gw, config, "auth", "whoami").stdout)
    assert table["Username"] == "system:serviceaccount:default:robot"
    assert table["Groups"] == ("[system:serviceaccounts system:serviceaccounts:default "
                               "system:authenticated]")
    uid = json.loads(gw.kubectl("get", "sa", "robot", "-o", "json").stdout)["metadata"]["uid"]
    assert table["UID"] == uid
    gw.kubectl("create", "rolebinding", "robot-view", "--clusterrole", "view",
               "--serviceaccount", "default:robot")
    assert _kubectl_as(gw, config, "get", "configmaps").returncode == 0
    denied = _kubectl_as(gw, config, "get", "configmaps", "-n", "kube-system", check=False)
    assert (denied.returncode, denied.stderr) == (1, (
        'Error from server (Forbidden): configmaps is forbidden: User '
        '"system:serviceaccount:default:robot" cannot list resource "configmaps" in API group '
        '"" in the namespace "kube-system"\n'))


def test_token_request_honours_audiences_and_expiry(gw: GatewayProcess) -> None:
    gw.kubectl("create", "serviceaccount", "aud-robot")
    token = gw.kubectl("create", "token", "aud-robot", "--audience", "my-backend",
                       "--duration", "10m").stdout.strip()
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["aud"] == ["my-backend"]
    assert claims["exp"] - claims["iat"] == 600
    assert whoami(gw, token=token) == (401, UNAUTHORIZED), "the token is for another audience"
    code, body, _ = https(gw, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", body={
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
        "spec": {"token": token, "audiences": ["my-backend"]}}, cert=_pair(gw.cert_dir, "admin"))
    assert code == 201, body
    assert body["status"]["authenticated"] is True
    assert body["status"]["audiences"] == ["my-backend"]
    assert body["status"]["user"]["username"] == "system:serviceaccount:default:aud-robot"
    assert "token" not in json.dumps(body["status"]).lower().replace("tokenreview", "")


def test_impersonation_with_as_and_as_group(gw: GatewayProcess) -> None:
    table = _whoami_table(gw.kubectl("auth", "whoami", "--as", "carol",
                                     "--as-group", "testers").stdout)
    assert table["Username"] == "carol"
    assert table["Groups"] == "[testers system:authenticated]"
    assert gw.kubectl("auth", "can-i", "get", "configmaps", "--as", "carol",
                      check=False).stdout.strip() == "no"
    assert gw.kubectl("auth", "can-i", "get", "configmaps", "--as", "carol", "--as-group",
                      "system:masters").stdout.strip() == "yes"


def test_impersonation_needs_the_impersonate_verb(gw: GatewayProcess) -> None:
    _forbidden(https(gw, "GET", "/api/v1/namespaces", token="bob-token",
                     headers={"Impersonate-User": "admin"}),
               'users "admin" is forbidden: User "bob" cannot impersonate resource "users" in '
               'API group "" at the cluster scope')
    gw.kubectl("create", "clusterrole", "impersonate-carol", "--verb", "impersonate",
               "--resource", "users", "--resource-name", "carol")
    gw.kubectl("create", "clusterrolebinding", "bob-impersonates-carol", "--clusterrole",
               "impersonate-carol", "--user", "bob")
    code, user = whoami(gw, token="bob-token", headers={"Impersonate-User": "carol"})
    assert code == 201 and user["username"] == "carol"
    _forbidden(https(gw, "GET", "/api", token="bob-token", headers={"Impersonate-User": "dave"}),
               'users "dave" is forbidden: User "bob" cannot impersonate resource "users" in '
               'API group "" at the cluster scope')
    # impersonating a group needs its own grant
    _forbidden(https(gw, "GET", "/api", token="bob-token",
                     headers={"Impersonate-User": "carol", "Impersonate-Group": "devs"}),
               'groups "devs" is forbidden: User "bob" cannot impersonate resource "groups" in '
               'API group "" at the cluster scope')


def test_impersonating_uid_and_extra_needs_their_own_grants(gw: GatewayProcess) -> None:
    gw.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "impersonate-dave"}, "rules": [
            {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"],
             "resourceNames": ["dave"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["uids"],
             "verbs": ["impersonate"], "resourceNames": ["uid-dave"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["userextras/scopes"],
             "verbs": ["impersonate"], "resourceNames": ["read"]}]}))
    gw.kubectl("create", "clusterrolebinding", "alice-impersonates-dave", "--clusterrole",
               "impersonate-dave", "--user", "alice")
    code, user = whoami(gw, token="alice-token", headers={
        "Impersonate-User": "dave", "Impersonate-Uid": "uid-dave",
        "Impersonate-Extra-Scopes": "read"})
    assert code == 201
    assert user == {"username": "dave", "uid": "uid-dave",
                    "groups": ["system:authenticated"], "extra": {"scopes": ["read"]}}
    expect_status(whoami(gw, token="alice-token", headers={
        "Impersonate-User": "dave", "Impersonate-Extra-Scopes": "write"}), 403, "Forbidden",
        message='userextras.authentication.k8s.io "write" is forbidden: User "alice" cannot '
                'impersonate resource "userextras/scopes" in API group '
                '"authentication.k8s.io" at the cluster scope')
    expect_status(whoami(gw, token="alice-token", headers={
        "Impersonate-User": "dave", "Impersonate-Uid": "uid-other"}), 403, "Forbidden",
        message='uids.authentication.k8s.io "uid-other" is forbidden: User "alice" cannot '
                'impersonate resource "uids" in API group "authentication.k8s.io" at the '
                'cluster scope')


def test_subject_access_reviews(gw: GatewayProcess) -> None:
    gw.kubectl("create", "namespace", "sar-ns")
    gw.kubectl("create", "rolebinding", "qa-view", "--clusterrole", "view", "--group", "qa",
               "-n", "sar-ns")
    admin = _pair(gw.cert_dir, "admin")

    def review(kind: str, path: str, user: str, groups: list[str], namespace: str) -> dict:
        code, body, _ = https(gw, "POST", path, cert=admin, body={
            "apiVersion": "authorization.k8s.io/v1", "kind": kind,
            "metadata": {"namespace": namespace} if kind.startswith("Local") else {},
            "spec": {"user": user, "groups": groups, "resourceAttributes": {
                "namespace": namespace, "verb": "list", "resource": "configmaps"}}})
        assert code == 201, body
        return body["status"]

    sar = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    allowed = review("SubjectAccessReview", sar, "zed", ["qa"], "sar-ns")
    assert allowed["allowed"] is True
    assert allowed["reason"] == ('RBAC: allowed by RoleBinding "qa-view/sar-ns" of ClusterRole '
                                 '"view" to Group "qa"')
    assert review("SubjectAccessReview", sar, "zed", [], "sar-ns")["allowed"] is False
    local = "/apis/authorization.k8s.io/v1/namespaces/sar-ns/localsubjectaccessreviews"
    assert review("LocalSubjectAccessReview", local, "zed", ["qa"], "sar-ns")["allowed"] is True
    # asking about others needs its own grant
    _forbidden(https(gw, "POST", sar, token="alice-token", body={
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "zed", "resourceAttributes": {"verb": "get", "resource": "x"}}}),
        'subjectaccessreviews.authorization.k8s.io is forbidden: User "alice" cannot create '
        'resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster '
        'scope')


GROUP_WITHOUT_USER = "requested [{Group  devs    }] without impersonating a user"


def test_impersonating_a_group_without_a_user_is_kubes_internal_error(
        gw: GatewayProcess) -> None:
    """kube-apiserver answers this with its plain-text internal error, not a Status."""
    code, body, headers = https(gw, "GET", "/api?x=<1>", token="alice-token",
                                headers={"Impersonate-Group": "devs"})
    assert (code, headers["Content-Type"]) == (500, "text/plain; charset=utf-8")
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert body == f'Internal Server Error: "/api?x=<1>": {GROUP_WITHOUT_USER}\n'.replace(
        "<", "&lt;").replace(">", "&gt;")


def test_can_i_and_can_i_list(gw: GatewayProcess, tmp_path: Path) -> None:
    gw.kubectl("create", "namespace", "alice-ns")
    gw.kubectl("create", "rolebinding", "alice-edit", "--clusterrole", "edit",
               "--user", "alice", "-n", "alice-ns")
    config = token_kubeconfig(gw, tmp_path / "alice.kubeconfig", "alice-token")
    can = _kubectl_as(gw, config, "auth", "can-i", "create", "configmaps", "-n", "alice-ns")
    assert can.stdout.strip() == "yes"
    cannot = _kubectl_as(gw, config, "auth", "can-i", "create", "configmaps", "-n", "default",
                         check=False)
    assert cannot.stdout.strip() == "no" and cannot.returncode == 1
    rules = _kubectl_as(gw, config, "auth", "can-i", "--list", "-n", "alice-ns").stdout
    lines = {line.split()[0]: line for line in rules.splitlines()[1:] if line.strip()}
    assert "configmaps" in lines and "create" in lines["configmaps"]
    assert "selfsubjectaccessreviews.authorization.k8s.io" in lines
    elsewhere = _kubectl_as(gw, config, "auth", "can-i", "--list", "-n", "default").stdout
    assert "configmaps " not in elsewhere


def test_anonymous_reaches_health_and_version_only(gw: GatewayProcess) -> None:
    for path in ("/healthz", "/livez", "/readyz", "/version"):
        code, _, _ = https(gw, "GET", path)
        assert code == 200, path
    _forbidden(https(gw, "GET", "/api/v1/namespaces"),
               'namespaces is forbidden: User "system:anonymous" cannot list resource '
               '"namespaces" in API group "" at the cluster scope')


def test_anonymous_off_and_modes_in_order(tmp_path: Path) -> None:
    with token_gateway(tmp_path, TOKENS, "--anonymous-auth=false",
                       "--authorization-mode", "RBAC,AlwaysAllow") as gw:
        code, body, _ = https(gw, "GET", "/version")
        assert (code, body) == (401, UNAUTHORIZED)
        code, body, _ = https(gw, "GET", "/api/v1/namespaces", token="alice-token")
        assert code == 200, "RBAC has no opinion, AlwaysAllow allows"


# -- hostile clients -----------------------------------------------------------------------


def test_unknown_token_is_401(gw: GatewayProcess) -> None:
    code, body, _ = https(gw, "GET", "/version", token="not-a-token")
    assert (code, body) == (401, UNAUTHORIZED)


def test_expired_service_account_token_is_401(gw: GatewayProcess) -> None:
    token = _sa_token(gw, "expiring")
    past = int(time.time()) - 3600
    expired = resigned_token(token, (gw.cert_dir / "sa.key").read_bytes(),
                             iat=past - 600, nbf=past - 600, exp=past)
    assert whoami(gw, token=token)[0] == 201
    assert whoami(gw, token=expired) == (401, UNAUTHORIZED)


def test_token_signed_by_another_key_is_401(gw: GatewayProcess) -> None:
    token = _sa_token(gw, "forged")
    forged = resigned_token(token, stranger_key_pem())
    assert whoami(gw, token=forged) == (401, UNAUTHORIZED)


def test_token_of_a_deleted_service_account_is_401(gw: GatewayProcess) -> None:
    token = _sa_token(gw, "short-lived")
    assert whoami(gw, token=token)[0] == 201
    gw.kubectl("delete", "serviceaccount", "short-lived")
    assert whoami(gw, token=token) == (401, UNAUTHORIZED)
    gw.kubectl("create", "serviceaccount", "short-lived")
    assert whoami(gw, token=token) == (401, UNAUTHORIZED), "a new account has a new uid"


def test_client_certificate_from_an_unknown_ca_is_401(gw: GatewayProcess,
                                                      tmp_path: Path) -> None:
    rogue = client_cert(tmp_path, "rogue", "admin", ("system:masters",))
    assert whoami(gw, cert=rogue) == (401, UNAUTHORIZED)


def test_client_certificate_from_the_client_ca(gw: GatewayProcess, tmp_path: Path) -> None:
    dana = client_cert(tmp_path, "dana", "dana", ("ops", "oncall"),
                       ca_cert=gw.cert_dir / "ca.crt", ca_key=gw.cert_dir / "ca.key")
    code, user = whoami(gw, cert=dana)
    assert code == 201
    assert user == {"username": "dana", "groups": ["ops", "oncall", "system:authenticated"]}


def test_remote_user_headers_without_front_proxy_cert_are_ignored(gw: GatewayProcess) -> None:
    spoof = {"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}
    _forbidden(https(gw, "GET", "/api/v1/namespaces", headers=spoof),
               'namespaces is forbidden: User "system:anonymous" cannot list resource '
               '"namespaces" in API group "" at the cluster scope')
    assert whoami(gw, token="bob-token", headers=spoof) == (201, {
        "username": "bob", "uid": "uid-bob", "groups": ["system:authenticated"]})
    assert whoami(gw, cert=_pair(gw.cert_dir, "admin"),
                  headers=spoof | {"X-Remote-User": "mallory"}) == (201, {
                      "username": "admin", "groups": ["system:masters", "system:authenticated"]})


def test_front_proxy_certificate_carries_the_user(gw: GatewayProcess) -> None:
    assert whoami(gw, cert=_pair(gw.cert_dir, "front-proxy-client"), headers={
        "X-Remote-User": "carol", "X-Remote-Group": "devs",
        "X-Remote-Extra-Scopes": "read"}) == (201, {
            "username": "carol", "groups": ["devs", "system:authenticated"],
            "extra": {"scopes": ["read"]}})


def test_front_proxy_certificate_with_a_name_not_allowed_is_401(gw: GatewayProcess,
                                                                tmp_path: Path) -> None:
    intruder = client_cert(tmp_path, "intruder", "intruder",
                           ca_cert=gw.cert_dir / "front-proxy-ca.crt",
                           ca_key=gw.cert_dir / "front-proxy-ca.key")
    assert whoami(gw, cert=intruder, headers={"X-Remote-User": "admin"}) == (401, UNAUTHORIZED)


# That neither the Authorization header nor X-Remote-* headers get past authentication is
# tested where the handlers' side can be seen: tests/unit/test_credential_headers.py.


def test_token_reviews_need_their_own_grant(gw: GatewayProcess) -> None:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
              "spec": {"token": "bob-token"}}
    path = "/apis/authentication.k8s.io/v1/tokenreviews"
    _forbidden(https(gw, "POST", path, token="alice-token", body=review),
               'tokenreviews.authentication.k8s.io is forbidden: User "alice" cannot create '
               'resource "tokenreviews" in API group "authentication.k8s.io" at the cluster '
               'scope')
    code, body, _ = https(gw, "POST", path, body=review, cert=_pair(gw.cert_dir, "admin"))
    assert code == 201, body
    assert body["status"]["user"] == {"username": "bob", "uid": "uid-bob",
                                      "groups": ["system:authenticated"]}


def test_extension_apiserver_authentication_configmap(gw: GatewayProcess) -> None:
    cm = json.loads(gw.kubectl("get", "configmap", "extension-apiserver-authentication", "-n",
                               "kube-system", "-o", "json").stdout)
    data = cm["data"]
    assert data["client-ca-file"] == (gw.cert_dir / "ca.crt").read_text()
    assert data["requestheader-client-ca-file"] == (gw.cert_dir / "front-proxy-ca.crt") \
        .read_text()
    assert json.loads(data["requestheader-allowed-names"]) == ["front-proxy-client"]
    assert json.loads(data["requestheader-username-headers"]) == ["X-Remote-User"]
    assert json.loads(data["requestheader-group-headers"]) == ["X-Remote-Group"]
    assert json.loads(data["requestheader-extra-headers-prefix"]) == ["X-Remote-Extra-"]
    assert json.loads(data["requestheader-uid-headers"]) == []
    _forbidden(https(gw, "GET", "/api/v1/namespaces/kube-system/configmaps/"
                     "extension-apiserver-authentication", token="alice-token"),
               'configmaps "extension-apiserver-authentication" is forbidden: User "alice" '
               'cannot get resource "configmaps" in API group "" in the namespace '
               '"kube-system"')
    gw.kubectl("create", "rolebinding", "alice-auth-reader", "-n", "kube-system",
               "--role", "extension-apiserver-authentication-reader", "--user", "alice")
    code, _, _ = https(gw, "GET", "/api/v1/namespaces/kube-system/configmaps/"
                       "extension-apiserver-authentication", token="alice-token")
    assert code == 200


def _pair(cert_dir: Path, stem: str) -> ClientCert:
    return ClientCert(cert_dir / f"{stem}.crt", cert_dir / f"{stem}.key")

"""Custom resources in /openapi/v3 and /openapi/v2 end to end: CRDs applied with kubectl, their
definitions and paths read back over HTTPS (JSON and the protobuf kubectl asks for), kubectl
explain (v3, and v2 with --output=plaintext-openapiv2), kubectl apply --validate=strict, an
update by kubectl apply (which reads /openapi/v2 to choose its patch type), several groups,
versions and kinds, and documents that follow the CRD: a changed schema, an un-served or
renamed version, a deleted CRD.

One gateway serves the module; each test uses groups and short names of its own."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from gateway.server.openapi import v2_message
from tests.support.gateway import GatewayProcess, send
from tests.support.wait import eventually
from tests.unit.test_crd_openapi import dangling
from tests.unit.test_openapi_protobuf import to_json

pytestmark = pytest.mark.slow
PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
META = "io.k8s.apimachinery.pkg.apis.meta.v1"
SCALE = "io.k8s.api.autoscaling.v1.Scale"
V3 = "#/components/schemas/"
CR_PATCH = ["application/json-patch+json", "application/merge-patch+json",
            "application/apply-patch+yaml"]


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    with GatewayProcess(tmp_path_factory.mktemp("crd-openapi")) as proc:
        yield proc


def new_group() -> str:
    return f"o{uuid.uuid4().hex[:8]}.example.com"


def reverse(group: str) -> str:
    return ".".join(reversed(group.split(".")))


def short(group: str, kind: str = "Widget") -> str:
    return kind[:2].lower() + group.split(".")[0][1:]


SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A widget made to order.",
    "properties": {
        "spec": {"type": "object", "description": "What the widget should be.",
                 "required": ["size"], "properties": {
                     "size": {"type": "string", "enum": ["small", "large"],
                              "description": "How big the widget is."},
                     "replicas": {"type": "integer", "minimum": 0, "default": 1},
                     "port": {"x-kubernetes-int-or-string": True,
                              "description": "Where it listens."},
                     "note": {"type": "string", "nullable": True},
                     "template": {"type": "object", "x-kubernetes-embedded-resource": True,
                                  "x-kubernetes-preserve-unknown-fields": True},
                     "$ref": {"type": "string", "description": "A field named $ref."},
                 }},
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"},
                                                    "selector": {"type": "string"}}},
    },
}


def crd(group: str, kind: str = "Widget", *, versions: tuple[str, ...] = ("v1", "v1beta1"),
        schema: dict[str, Any] | None = None, scope: str = "Namespaced") -> dict[str, Any]:
    plural = kind.lower() + "s"
    entries = [{"name": v, "served": True, "storage": i == 0,
                "schema": {"openAPIV3Schema": copy.deepcopy(schema or SCHEMA)},
                "subresources": {"status": {}, "scale": {
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"}}}
               for i, v in enumerate(versions)]
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": scope,
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind,
                               "shortNames": [short(group, kind)]},
                     "versions": entries}}


def apply(gw: GatewayProcess, *objects: dict[str, Any], check: bool = True,
          args: tuple[str, ...] = ()) -> Any:
    return gw.kubectl("apply", *args, "-f", "-", input=yaml.safe_dump_all(objects),
                      check=check)


def install(gw: GatewayProcess, *crds: dict[str, Any]) -> None:
    """Apply and wait until established; then a kubectl get by the short name, so kubectl's
    cached discovery knows the group (an unknown short name makes kubectl discover again;
    ``kubectl explain <plural>.<group>`` would otherwise pick another group's plural)."""
    apply(gw, *crds)
    for obj in crds:
        gw.kubectl("wait", "--for=condition=established", "--timeout=30s",
                   f"crd/{obj['metadata']['name']}")
        gw.kubectl("get", obj["spec"]["names"]["shortNames"][0], "-A")


def get(gw: GatewayProcess, path: str, **headers: str) -> tuple[int, bytes]:
    code, body, _ = send(gw.url + path, "GET", gw.ssl_context(), headers=headers)
    return code, body


def v3_index(gw: GatewayProcess) -> dict[str, str]:
    code, body = get(gw, "/openapi/v3")
    assert code == 200, body[:300]
    return {gv: entry["serverRelativeURL"] for gv, entry in json.loads(body)["paths"].items()}


def v3_document(gw: GatewayProcess, gv: str) -> dict[str, Any]:
    url = v3_index(gw)[gv]
    code, body = get(gw, url)
    assert code == 200, body[:300]
    return json.loads(body)


def listed(gw: GatewayProcess, *gvs: str) -> dict[str, str]:
    def check() -> dict[str, str]:
        index = v3_index(gw)
        assert all(gv in index for gv in gvs), sorted(index)
        return index
    return eventually(check, what=f"{gvs} in /openapi/v3")


def v2_json(gw: GatewayProcess) -> dict[str, Any]:
    code, body = get(gw, "/openapi/v2", Accept="application/json")
    assert code == 200, body[:300]
    return json.loads(body)


def v2_protobuf(gw: GatewayProcess) -> dict[str, Any]:
    code, body = get(gw, "/openapi/v2", Accept=PROTOBUF)
    assert code == 200 and not body.startswith(b"{")
    message = v2_message("Document")()
    message.ParseFromString(body)
    return to_json(message)


def explain(gw: GatewayProcess, *args: str) -> str:
    def run() -> str:
        result = gw.kubectl("explain", *args, check=False)
        assert result.returncode == 0, result.stderr
        return result.stdout
    return eventually(run, what=f"kubectl explain {' '.join(args)}")


# -- /openapi/v3 and kubectl explain ------------------------------------------------------------


def test_v3_document_of_a_crd_and_kubectl_explain(gw):
    g = new_group()
    install(gw, crd(g))
    listed(gw, f"apis/{g}/v1", f"apis/{g}/v1beta1")
    document = v3_document(gw, f"apis/{g}/v1")
    schemas = document["components"]["schemas"]
    name = f"{reverse(g)}.v1.Widget"
    assert dangling(document) == []
    assert f"{reverse(g)}.v1beta1.Widget" not in schemas  # one document per group version
    widget = schemas[name]
    assert widget["x-kubernetes-group-version-kind"] == [
        {"group": g, "kind": "Widget", "version": "v1"}]
    assert widget["properties"]["metadata"]["allOf"] == [{"$ref": f"{V3}{META}.ObjectMeta"}]
    spec = widget["properties"]["spec"]["properties"]
    assert spec["port"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert spec["note"] == {"type": "string", "nullable": True}
    assert spec["replicas"]["default"] == 1
    assert spec["$ref"] == {"type": "string", "description": "A field named $ref."}
    assert set(spec["template"]["properties"]) == {"apiVersion", "kind", "metadata"}
    items = schemas[f"{name}List"]["properties"]["items"]["items"]
    assert items == {"$ref": f"{V3}{name}"}
    assert f"{META}.ListMeta" in schemas and SCALE in schemas
    item = f"/apis/{g}/v1/namespaces/{{namespace}}/widgets/{{name}}"
    assert list(document["paths"][item]["patch"]["requestBody"]["content"]) == CR_PATCH
    scale = document["paths"][item + "/scale"]["get"]["responses"]["200"]["content"]
    assert scale["application/json"]["schema"] == {"$ref": f"{V3}{SCALE}"}
    assert "put" in document["paths"][item + "/status"]

    out = explain(gw, f"widgets.{g}")
    assert f"GROUP:      {g}" in out and "KIND:       Widget" in out, out
    assert "VERSION:    v1\n" in out and "A widget made to order." in out, out
    assert "metadata\t<ObjectMeta>" in out and "spec\t<Object>" in out, out
    out = explain(gw, f"widgets.{g}.spec.size")
    assert "FIELD: size <string>" in out and "How big the widget is." in out, out
    assert "ENUM:\n    small\n    large" in out, out
    # with --api-version kubectl takes the first name as the resource: the short name
    out = explain(gw, f"{short(g)}.spec", f"--api-version={g}/v1beta1")
    assert "VERSION:    v1beta1" in out and "size\t<string> -required-" in out, out


def test_strict_validation_of_a_custom_resource(gw):
    g = new_group()
    install(gw, crd(g))
    listed(gw, f"apis/{g}/v1")
    good = {"apiVersion": f"{g}/v1", "kind": "Widget",
            "metadata": {"name": "strict", "namespace": "default"}, "spec": {"size": "small"}}
    bad = copy.deepcopy(good)
    bad["metadata"]["name"] = "strict-bad"
    bad["spec"]["bogus"] = 1

    def refused() -> Any:
        result = apply(gw, bad, check=False, args=("--validate=strict", "-v=6"))
        assert result.returncode == 1, result.stdout
        return result
    result = eventually(refused, what="strict validation refusing an unknown field")
    assert 'unknown field "spec.bogus"' in result.stderr, result.stderr[-2000:]
    # kubectl learned from the group version's v3 document that the server validates
    assert f"/openapi/v3/apis/{g}/v1?hash=" in result.stderr
    out = apply(gw, good, args=("--validate=strict",)).stdout
    assert f"widget.{g}/strict created" in out


# -- /openapi/v2 --------------------------------------------------------------------------------


def test_v2_json_protobuf_explain_and_kubectl_apply(gw):
    g = new_group()
    install(gw, crd(g))
    names = [f"{reverse(g)}.{v}.{k}" for v in ("v1", "v1beta1") for k in ("Widget", "WidgetList")]

    def merged() -> dict[str, Any]:
        document = v2_json(gw)
        assert all(n in document["definitions"] for n in names), names
        return document
    document = eventually(merged, what="the CRD's definitions in /openapi/v2")
    assert dangling(document) == []
    widget = document["definitions"][names[0]]
    assert widget["properties"]["metadata"]["$ref"] == f"#/definitions/{META}.ObjectMeta"
    spec = widget["properties"]["spec"]["properties"]
    assert spec["port"] == {"x-kubernetes-int-or-string": True, "description": "Where it listens."}
    assert spec["note"] == {}  # nullable: no type
    assert spec["replicas"] == {"type": "integer", "minimum": 0}  # no default in v2
    assert spec["template"] == {"x-kubernetes-embedded-resource": True,
                                "x-kubernetes-preserve-unknown-fields": True}
    item = f"/apis/{g}/v1/namespaces/{{namespace}}/widgets/{{name}}"
    assert document["paths"][item]["patch"]["consumes"] == CR_PATCH

    decoded = v2_protobuf(gw)
    assert decoded["definitions"][names[0]]["properties"]["spec"]["properties"]["port"] == \
        spec["port"]
    assert decoded["definitions"][names[0]]["x-kubernetes-group-version-kind"] == [
        {"group": g, "kind": "Widget", "version": "v1"}]
    assert decoded["paths"][item]["patch"]["consumes"] == CR_PATCH

    out = explain(gw, f"widgets.{g}.spec", "--output=plaintext-openapiv2")
    assert "KIND:     Widget" in out and f"VERSION:  {g}/v1" in out, out
    assert "size\t<string> -required-" in out and "How big the widget is." in out, out

    # an update by kubectl apply: no strategic merge patch in v3, so kubectl asks /openapi/v2
    # (protobuf) which patch types the kind takes, and sends a merge patch
    widget_cr = {"apiVersion": f"{g}/v1", "kind": "Widget",
                 "metadata": {"name": "applied", "namespace": "default"},
                 "spec": {"size": "small"}}
    assert f"widget.{g}/applied created" in apply(gw, widget_cr).stdout
    widget_cr["spec"]["size"] = "large"
    result = apply(gw, widget_cr, args=("-v=6",))
    assert f"widget.{g}/applied configured" in result.stdout
    assert "GET " in result.stderr and "/openapi/v2?timeout=" in result.stderr, \
        result.stderr[-3000:]
    assert "error calculating patch" not in result.stderr
    assert "PATCH " in result.stderr
    assert gw.kubectl("get", f"widgets.{g}", "applied", "-n", "default", "-o",
                      "jsonpath={.spec.size}").stdout == "large"


# -- several groups, versions and kinds ---------------------------------------------------------


def test_several_groups_versions_and_kinds(gw):
    a, b = new_group(), new_group()
    install(gw, crd(a), crd(a, "Gadget", versions=("v1",), scope="Cluster"),
            crd(b, "Widget", versions=("v2",)))
    listed(gw, f"apis/{a}/v1", f"apis/{a}/v1beta1", f"apis/{b}/v2")
    a_v1 = v3_document(gw, f"apis/{a}/v1")["components"]["schemas"]
    assert {f"{reverse(a)}.v1.Widget", f"{reverse(a)}.v1.Gadget",
            f"{reverse(a)}.v1.GadgetList"} <= set(a_v1)
    assert not any(n.startswith(reverse(b)) for n in a_v1)
    a_v1beta1 = v3_document(gw, f"apis/{a}/v1beta1")
    assert f"{reverse(a)}.v1beta1.Widget" in a_v1beta1["components"]["schemas"]
    assert f"{reverse(a)}.v1.Gadget" not in a_v1beta1["components"]["schemas"]
    b_v2 = v3_document(gw, f"apis/{b}/v2")
    assert f"{reverse(b)}.v2.Widget" in b_v2["components"]["schemas"]
    assert f"/apis/{b}/v2/namespaces/{{namespace}}/widgets" in b_v2["paths"]
    gadgets = v3_document(gw, f"apis/{a}/v1")["paths"]
    assert f"/apis/{a}/v1/gadgets/{{name}}" in gadgets  # cluster-scoped
    definitions = eventually(lambda: v2_json(gw)["definitions"])
    for name in (f"{reverse(a)}.v1.Widget", f"{reverse(a)}.v1beta1.Widget",
                 f"{reverse(a)}.v1.Gadget", f"{reverse(b)}.v2.Widget"):
        assert name in definitions, name
    assert "KIND:       Gadget" in explain(gw, f"gadgets.{a}")
    out = explain(gw, f"widgets.{b}")
    assert f"GROUP:      {b}" in out and "VERSION:    v2" in out, out


# -- following the CRD --------------------------------------------------------------------------


def test_documents_follow_schema_changes_unserved_renamed_and_deleted_versions(gw):
    g = new_group()
    obj = crd(g)
    install(gw, obj)
    old_url = listed(gw, f"apis/{g}/v1", f"apis/{g}/v1beta1")[f"apis/{g}/v1"]
    assert "color" not in explain(gw, f"widgets.{g}.spec")

    # a new field in v1's schema: a new document under a new hash, in v2 too
    obj["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["color"] = {"type": "string", "description": "The widget's colour."}
    apply(gw, obj)

    def new_url() -> str:
        url = v3_index(gw)[f"apis/{g}/v1"]
        assert url != old_url
        return url
    url = eventually(new_url, what="a new hash for the changed group version")
    code, body = get(gw, url)
    spec = json.loads(body)["components"]["schemas"][f"{reverse(g)}.v1.Widget"][
        "properties"]["spec"]["properties"]
    assert spec["color"]["description"] == "The widget's colour."
    code, body = get(gw, old_url)  # the old hash redirects to the current document
    assert code == 200 and json.loads(body)["components"]["schemas"][
        f"{reverse(g)}.v1.Widget"]["properties"]["spec"]["properties"]["color"]
    v2_spec = v2_json(gw)["definitions"][f"{reverse(g)}.v1.Widget"]["properties"]["spec"]
    assert "color" in v2_spec["properties"]
    assert "The widget's colour." in explain(gw, f"widgets.{g}.spec.color")

    # v1beta1 no longer served: gone from both documents
    obj["spec"]["versions"][1]["served"] = False
    apply(gw, obj)

    def unserved() -> bool:
        index = v3_index(gw)
        definitions = v2_json(gw)["definitions"]
        return f"apis/{g}/v1beta1" not in index and f"apis/{g}/v1" in index and \
            f"{reverse(g)}.v1beta1.Widget" not in definitions and \
            f"{reverse(g)}.v1.Widget" in definitions
    eventually(unserved, what="the un-served version gone")
    code, _ = get(gw, f"/openapi/v3/apis/{g}/v1beta1")
    assert code == 404

    # renamed (v1beta1 never stored): v1beta2 listed instead
    obj["spec"]["versions"][1]["name"] = "v1beta2"
    obj["spec"]["versions"][1]["served"] = True
    apply(gw, obj)

    def renamed() -> bool:
        index = v3_index(gw)
        definitions = v2_json(gw)["definitions"]
        return f"apis/{g}/v1beta2" in index and f"apis/{g}/v1beta1" not in index and \
            f"{reverse(g)}.v1beta2.Widget" in definitions
    eventually(renamed, what="the renamed version listed")
    out = explain(gw, short(g), f"--api-version={g}/v1beta2")
    assert "VERSION:    v1beta2" in out, out

    # the CRD deleted: nothing of its group left
    gw.kubectl("delete", "crd", f"widgets.{g}")

    def deleted() -> bool:
        index = v3_index(gw)
        definitions = v2_json(gw)["definitions"]
        return not any(gv.startswith(f"apis/{g}/") for gv in index) and \
            not any(n.startswith(reverse(g) + ".") for n in definitions)
    eventually(deleted, what="the deleted CRD's documents gone")

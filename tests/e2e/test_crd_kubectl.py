"""kubectl as a user drives custom resources: a CRD applied and waited for, then instances
created, listed (printer columns, -o wide, short names, categories), described, patched,
replaced, labelled and deleted; ``kubectl get crd``, ``kubectl api-resources`` and
``kubectl explain`` as they show CRDs; deleting a CRD takes its instances with it.

One gateway serves the module. Most tests share one group of CRDs (a namespaced Gadget and a
Doohickey in the same category, a cluster-scoped Thingamajig) and work in a namespace of their
own; the tests that create or delete CRDs use a group of their own."""

from __future__ import annotations

import copy
import json
import re
import uuid
from typing import Any

import pytest
import yaml

from tests.support.gateway import GatewayProcess
from tests.support.wait import eventually

pytestmark = pytest.mark.slow

SCHEMA = {
    "type": "object",
    "description": "A Gadget is a small mechanical device.",
    "properties": {
        "spec": {"type": "object", "description": "What the gadget should be.",
                 "required": ["size"], "properties": {
                     "size": {"type": "string", "enum": ["small", "large"],
                              "description": "How big the gadget is."},
                     "replicas": {"type": "integer", "minimum": 0, "default": 1,
                                  "description": "How many gadgets to run."},
                     "image": {"type": "string", "description": "The image gadgets run."}}},
        "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
    },
}
COLUMNS = [
    {"name": "Size", "type": "string", "jsonPath": ".spec.size"},
    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
    {"name": "Image", "type": "string", "jsonPath": ".spec.image", "priority": 1},
    {"name": "Ready", "type": "boolean", "jsonPath": ".status.ready"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


class Group:
    """A CRD group of one test (or of the module) and the names it gives."""

    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex[:8]
        self.name = f"k{self.tag}.example.com"
        self.short = f"gd{self.tag}"
        self.category = f"toys-{self.tag}"

    def gadgets(self, **overrides: Any) -> dict[str, Any]:
        version = {"served": True, "schema": {"openAPIV3Schema": SCHEMA},
                   "subresources": {"status": {}}, "additionalPrinterColumns": COLUMNS}
        crd = {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"gadgets.{self.name}"},
            "spec": {"group": self.name, "scope": "Namespaced",
                     "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget",
                               "shortNames": [self.short], "categories": [self.category]},
                     "versions": [{"name": "v1", "storage": True, **copy.deepcopy(version)}]},
        }
        crd["spec"].update(overrides)
        return crd

    def doohickeys(self) -> dict[str, Any]:
        return {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"doohickeys.{self.name}"},
            "spec": {"group": self.name, "scope": "Namespaced",
                     "names": {"plural": "doohickeys", "singular": "doohickey",
                               "kind": "Doohickey", "categories": [self.category]},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]},
        }

    def thingamajigs(self) -> dict[str, Any]:
        return {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"thingamajigs.{self.name}"},
            "spec": {"group": self.name, "scope": "Cluster",
                     "names": {"plural": "thingamajigs", "singular": "thingamajig",
                               "kind": "Thingamajig"},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object",
                                       "x-kubernetes-preserve-unknown-fields": True}}}]},
        }

    def gadget(self, name: str, ns: str, labels: dict[str, str] | None = None,
               **spec: Any) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": ns}
        if labels:
            meta["labels"] = labels
        return {"apiVersion": f"{self.name}/v1", "kind": "Gadget", "metadata": meta,
                "spec": {"size": "small", **spec}}


def kubectl_apply(gw: GatewayProcess, *objects: dict[str, Any], check: bool = True,
                  extra: tuple[str, ...] = ()) -> Any:
    return gw.kubectl("apply", *extra, "-f", "-", input=yaml.safe_dump_all(objects),
                      check=check)


def established(gw: GatewayProcess, *names: str) -> str:
    return gw.kubectl("wait", "--for", "condition=established", "--timeout=30s",
                      *(f"crd/{n}" for n in names)).stdout


def table(out: str, headers: bool = True) -> list[list[str]]:
    """kubectl's table output as cells: kubectl aligns every cell at its column's start, so
    the header's words mark the columns (an empty cell is ""); without headers, cells are
    split on runs of two or more spaces."""
    lines = [line for line in out.splitlines() if line.strip()]
    if not headers:
        return [re.split(r"\s{2,}", line.strip()) for line in lines]
    # a header is words apart by two or more spaces ("CREATED AT" is one)
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=\s\s))\S", lines[0])] if lines else []
    bounds = list(zip(starts, [*starts[1:], None], strict=True))
    return [[line[a:b].strip() for a, b in bounds] for line in lines]


@pytest.fixture(scope="module")
def grp(gateway: GatewayProcess) -> Group:
    """The module's CRDs, created and Established."""
    g = Group()
    kubectl_apply(gateway, g.gadgets(), g.doohickeys(), g.thingamajigs())
    established(gateway, f"gadgets.{g.name}", f"doohickeys.{g.name}",
                f"thingamajigs.{g.name}")
    return g


# -- CRDs --------------------------------------------------------------------------------------


def test_kubectl_apply_a_crd_and_wait_for_it(gateway):
    g = Group()
    crd = f"gadgets.{g.name}"
    out = kubectl_apply(gateway, g.gadgets()).stdout
    assert out == f"customresourcedefinition.apiextensions.k8s.io/{crd} created\n"
    assert established(gateway, crd) == \
        f"customresourcedefinition.apiextensions.k8s.io/{crd} condition met\n"
    out = gateway.kubectl("wait", "--for=condition=NamesAccepted", f"crd/{crd}").stdout
    assert out == f"customresourcedefinition.apiextensions.k8s.io/{crd} condition met\n"
    assert kubectl_apply(gateway, g.gadgets()).stdout == \
        f"customresourcedefinition.apiextensions.k8s.io/{crd} unchanged\n"
    status = gateway.kubectl("get", "crd", crd, "-o",
                             'jsonpath={.status.conditions[?(@.type=="Established")].status}')
    assert status.stdout == "True"
    # a change to the CRD is configured, and served at once
    changed = g.gadgets()
    changed["spec"]["names"]["shortNames"] = [g.short, g.short + "x"]
    assert kubectl_apply(gateway, changed).stdout == \
        f"customresourcedefinition.apiextensions.k8s.io/{crd} configured\n"
    kubectl_apply(gateway, g.gadget("one", "default"))
    # the new short name is served once the naming controller accepted it
    out = eventually(lambda: gateway.kubectl("get", g.short + "x", "one", "-o", "name",
                                             check=False).stdout, timeout=15,
                     what="the new short name served")
    assert out == f"gadget.{g.name}/one\n"
    gateway.kubectl("delete", g.short, "one")


def test_kubectl_get_crd_shows_name_and_created_at(gateway, grp):
    """The CRD store has kube's default table convertor (rest.NewDefaultTableConvertor):
    columns Name and Created At, the creation time as RFC 3339."""
    crd = f"gadgets.{grp.name}"
    created = gateway.kubectl("get", "crd", crd, "-o",
                              "jsonpath={.metadata.creationTimestamp}").stdout
    rows = table(gateway.kubectl("get", "crd", crd).stdout)
    assert rows == [["NAME", "CREATED AT"], [crd, created]]
    listed = table(gateway.kubectl("get", "crds").stdout)
    assert listed[0] == ["NAME", "CREATED AT"]
    assert [crd, created] in listed


def test_kubectl_api_resources_lists_the_crds(gateway, grp):
    rows = table(gateway.kubectl("api-resources", "--api-group", grp.name, "-o", "wide").stdout)
    assert rows[0] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND", "VERBS",
                       "CATEGORIES"]
    verbs = "create,delete,deletecollection,get,list,patch,update,watch"
    by_name = {row[0]: row for row in rows[1:]}
    assert by_name["gadgets"] == ["gadgets", grp.short, f"{grp.name}/v1", "true", "Gadget",
                                  verbs, grp.category]
    assert by_name["doohickeys"] == ["doohickeys", "", f"{grp.name}/v1", "true", "Doohickey",
                                     verbs, grp.category]
    assert by_name["thingamajigs"] == ["thingamajigs", "", f"{grp.name}/v1", "false",
                                       "Thingamajig", verbs, ""]
    out = gateway.kubectl("api-resources", "--categories", grp.category, "-o", "name").stdout
    assert sorted(out.split()) == [f"doohickeys.{grp.name}", f"gadgets.{grp.name}"]
    out = gateway.kubectl("api-resources", "--api-group", grp.name, "--namespaced=false",
                          "-o", "name").stdout
    assert out.split() == [f"thingamajigs.{grp.name}"]
    # the CRD resource itself
    out = gateway.kubectl("api-resources", "--api-group", "apiextensions.k8s.io", "-o",
                          "wide").stdout
    assert table(out)[1] == ["customresourcedefinitions", "crd,crds",
                             "apiextensions.k8s.io/v1", "false", "CustomResourceDefinition",
                             verbs, "api-extensions"]


def test_kubectl_explain_a_custom_resource(gateway, grp):
    """kube publishes each served version's schema in /openapi/v3 (and v2), so kubectl explain
    reads the CRD's descriptions."""
    out = gateway.kubectl("explain", f"gadgets.{grp.name}.spec", check=False)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"GROUP:      {grp.name}" in text and "KIND:       Gadget" in text
    assert "What the gadget should be." in text
    assert re.search(r"size\s+<string> -required-", text), text
    assert "How big the gadget is." in text
    assert re.search(r"replicas\s+<integer>", text), text
    out = gateway.kubectl("explain", f"gadgets.{grp.name}.spec.size", check=False)
    assert out.returncode == 0, out.stderr
    assert "ENUM:" in out.stdout and "small" in out.stdout and "large" in out.stdout


def test_kubectl_delete_crd_deletes_its_instances(gateway, ns):
    g = Group()
    crd = f"gadgets.{g.name}"
    kubectl_apply(gateway, g.gadgets())
    established(gateway, crd)
    other = f"o-{uuid.uuid4().hex[:6]}"
    gateway.kubectl("create", "namespace", other)
    kubectl_apply(gateway, g.gadget("a", ns), g.gadget("b", ns), g.gadget("c", other))
    assert len(gateway.kubectl("get", crd, "-A", "-o", "name").stdout.split()) == 3

    out = gateway.kubectl("delete", "crd", crd, "--timeout=60s").stdout
    assert out == f'customresourcedefinition.apiextensions.k8s.io "{crd}" deleted\n'
    gone = gateway.kubectl("get", "crd", crd, check=False)
    assert gone.returncode == 1
    assert gone.stderr.strip() == \
        f'Error from server (NotFound): customresourcedefinitions.apiextensions.k8s.io ' \
        f'"{crd}" not found'
    # the resource leaves discovery (kube does this right after the CRD goes)
    gone = eventually(lambda: (lambda r: r if r.returncode == 1 and "resource type" in r.stderr
                               else None)(gateway.kubectl("get", crd, "-A", check=False)),
                      timeout=15, what="the resource gone from discovery")
    assert gone.stderr.strip() == 'error: the server doesn\'t have a resource type "gadgets"'

    # the same CRD again: none of the old instances come back
    kubectl_apply(gateway, g.gadgets())
    established(gateway, crd)
    again = eventually(lambda: (lambda r: r if r.returncode == 0 else None)(
        gateway.kubectl("get", crd, "-A", check=False)), timeout=15,
        what="the resource served again")
    assert again.stdout == "" and again.stderr.strip() == "No resources found"


# -- custom resources --------------------------------------------------------------------------


def test_kubectl_get_shows_the_printer_columns(gateway, grp, ns):
    out = kubectl_apply(gateway, grp.gadget("one", ns, image="nginx"),
                        grp.gadget("two", ns, size="large", replicas=3)).stdout
    assert out == f"gadget.{grp.name}/one created\ngadget.{grp.name}/two created\n"
    gateway.kubectl("patch", grp.short, "one", "-n", ns, "--subresource=status",
                    "--type=merge", "-p", '{"status":{"ready":true}}')

    rows = table(gateway.kubectl("get", grp.short, "-n", ns).stdout)
    assert rows[0] == ["NAME", "SIZE", "REPLICAS", "READY", "AGE"]
    assert [row[:4] for row in rows[1:]] == [["one", "small", "1", "true"],
                                             ["two", "large", "3", ""]]
    wide = table(gateway.kubectl("get", grp.short, "-n", ns, "-o", "wide").stdout)
    assert wide[0] == ["NAME", "SIZE", "REPLICAS", "IMAGE", "READY", "AGE"]
    assert [row[:5] for row in wide[1:]] == [["one", "small", "1", "nginx", "true"],
                                             ["two", "large", "3", "", ""]]
    everywhere = table(gateway.kubectl("get", grp.short, "-A").stdout)
    assert everywhere[0] == ["NAMESPACE", "NAME", "SIZE", "REPLICAS", "READY", "AGE"]
    assert [ns, "one", "small", "1", "true"] in [row[:5] for row in everywhere[1:]]
    one = table(gateway.kubectl("get", grp.short, "one", "-n", ns, "--no-headers").stdout,
                headers=False)
    assert [row[:4] for row in one] == [["one", "small", "1", "true"]]
    # the date column: how long ago, as for any kube object
    ages = [row[-1] for row in rows[1:] + wide[1:] + one]
    assert all(re.fullmatch(r"\d+s", age) for age in ages), ages


def test_kubectl_get_by_every_name_and_by_category(gateway, grp, ns):
    kubectl_apply(gateway, grp.gadget("g1", ns),
                  {"apiVersion": f"{grp.name}/v1", "kind": "Doohickey",
                   "metadata": {"name": "d1", "namespace": ns}, "anything": {"goes": True}})
    expected = f"gadget.{grp.name}/g1\n"
    # (the bare plural and singular are other tests' too: other groups have Gadgets)
    for name in (grp.short, f"gadgets.{grp.name}", f"gadget.{grp.name}",
                 f"gadgets.v1.{grp.name}", f"Gadget.{grp.name}"):
        out = gateway.kubectl("get", name, "-n", ns, "-o", "name")
        assert out.stdout == expected, name
    out = gateway.kubectl("get", grp.category, "-n", ns, "-o", "name").stdout
    assert sorted(out.split()) == [f"doohickey.{grp.name}/d1", f"gadget.{grp.name}/g1"]
    got = json.loads(gateway.kubectl("get", f"doohickey.{grp.name}", "d1", "-n", ns, "-o",
                                     "json").stdout)
    assert got["anything"] == {"goes": True}  # preserved unknown fields
    out = gateway.kubectl("get", grp.short, "-n", ns, "-o",
                          "custom-columns=N:.metadata.name,S:.spec.size,R:.spec.replicas")
    assert table(out.stdout) == [["N", "S", "R"], ["g1", "small", "1"]]
    out = gateway.kubectl("get", grp.short, "g1", "-n", ns, "-o", "jsonpath={.spec}")
    assert json.loads(out.stdout) == {"size": "small", "replicas": 1}


def test_kubectl_describe_a_custom_resource(gateway, grp, ns):
    kubectl_apply(gateway, grp.gadget("d", ns, labels={"app": "demo"}, image="nginx"))
    gateway.kubectl("patch", grp.short, "d", "-n", ns, "--subresource=status", "--type=merge",
                    "-p", '{"status":{"ready":true}}')
    out = gateway.kubectl("describe", grp.short, "d", "-n", ns).stdout
    fields = dict(re.findall(r"^(\S[^:]*):\s*(.*)$", out, re.M))
    assert fields["Name"] == "d" and fields["Namespace"] == ns
    assert fields["Labels"] == "app=demo"
    assert fields["API Version"] == f"{grp.name}/v1" and fields["Kind"] == "Gadget"
    assert fields["Events"] == "<none>"
    assert re.search(r"^Spec:\n\s+Image:\s+nginx\n\s+Replicas:\s+1\n\s+Size:\s+small$", out,
                     re.M), out
    assert re.search(r"^Status:\n\s+Ready:\s+true$", out, re.M), out


def test_kubectl_patch_merge_json_and_status(gateway, grp, ns):
    kubectl_apply(gateway, grp.gadget("p", ns))
    kind = f"gadget.{grp.name}"

    out = gateway.kubectl("patch", grp.short, "p", "-n", ns, "--type", "merge", "-p",
                          '{"spec":{"image":"redis"}}').stdout
    assert out == f"{kind}/p patched\n"
    out = gateway.kubectl("patch", grp.short, "p", "-n", ns, "--type", "merge", "-p",
                          '{"spec":{"image":"redis"}}').stdout
    assert out == f"{kind}/p patched (no change)\n"
    out = gateway.kubectl("patch", grp.short, "p", "-n", ns, "--type", "json", "-p",
                          '[{"op":"replace","path":"/spec/size","value":"large"},'
                          '{"op":"add","path":"/spec/replicas","value":5}]').stdout
    assert out == f"{kind}/p patched\n"
    out = gateway.kubectl("patch", grp.short, "p", "-n", ns, "--subresource=status",
                          "--type=merge", "-p",
                          '{"status":{"ready":true},"spec":{"size":"small"}}').stdout
    assert out == f"{kind}/p patched\n"
    got = json.loads(gateway.kubectl("get", grp.short, "p", "-n", ns, "-o", "json").stdout)
    assert got["spec"] == {"size": "large", "replicas": 5, "image": "redis"}
    assert got["status"] == {"ready": True}
    assert got["metadata"]["generation"] == 3

    # kubectl's default patch type is a strategic merge patch: CRs have none
    bad = gateway.kubectl("patch", grp.short, "p", "-n", ns, "-p", '{"spec":{"image":"x"}}',
                          check=False)
    assert bad.returncode == 1
    assert bad.stderr.strip() == (
        f"error: application/strategic-merge-patch+json is not supported by {grp.name}/v1, "
        "Kind=Gadget: the body of the request was in an unknown format - accepted media "
        "types include: application/json-patch+json, application/merge-patch+json, "
        "application/apply-patch+yaml")
    invalid = gateway.kubectl("patch", grp.short, "p", "-n", ns, "--type", "merge", "-p",
                              '{"spec":{"size":"huge"}}', check=False)
    assert invalid.returncode == 1
    assert invalid.stderr.strip() == (
        'The Gadget "p" is invalid: spec.size: Unsupported value: "huge": supported values: '
        '"small", "large"')


def test_kubectl_replace_from_a_file(gateway, grp, ns):
    kubectl_apply(gateway, grp.gadget("r", ns, image="nginx"))
    current = json.loads(gateway.kubectl("get", grp.short, "r", "-n", ns, "-o", "json").stdout)
    edited = copy.deepcopy(current)
    edited["spec"] = {"size": "large"}
    out = gateway.kubectl("replace", "-f", "-", input=json.dumps(edited)).stdout
    assert out == f"gadget.{grp.name}/r replaced\n"
    got = json.loads(gateway.kubectl("get", grp.short, "r", "-n", ns, "-o", "json").stdout)
    assert got["spec"] == {"size": "large", "replicas": 1}  # image gone, replicas defaulted
    assert got["metadata"]["generation"] == 2

    stale = gateway.kubectl("replace", "-f", "-", input=json.dumps(edited), check=False)
    assert stale.returncode == 1
    assert stale.stderr.strip() == (
        f'Error from server (Conflict): error when replacing "STDIN": Operation cannot be '
        f'fulfilled on gadgets.{grp.name} "r": the object has been modified; please apply '
        "your changes to the latest version and try again")
    # without a resourceVersion kubectl replace takes the object as it is now
    del edited["metadata"]["resourceVersion"]
    edited["spec"]["replicas"] = 2
    assert gateway.kubectl("replace", "-f", "-", input=json.dumps(edited)).stdout == \
        f"gadget.{grp.name}/r replaced\n"
    missing = copy.deepcopy(edited)
    missing["metadata"]["name"] = "nope"
    gone = gateway.kubectl("replace", "-f", "-", input=json.dumps(missing), check=False)
    assert gone.returncode == 1
    assert gone.stderr.strip() == (
        f'Error from server (NotFound): error when replacing "STDIN": gadgets.{grp.name} '
        '"nope" not found')


def test_kubectl_label_annotate_and_delete_by_label(gateway, grp, ns):
    kubectl_apply(gateway, grp.gadget("a", ns), grp.gadget("b", ns), grp.gadget("c", ns))
    kind = f"gadget.{grp.name}"
    out = gateway.kubectl("label", grp.short, "a", "b", "-n", ns, "tier=web").stdout
    assert out == f"{kind}/a labeled\n{kind}/b labeled\n"
    out = gateway.kubectl("annotate", grp.short, "a", "-n", ns, "owner=me").stdout
    assert out == f"{kind}/a annotated\n"
    refused = gateway.kubectl("label", grp.short, "a", "-n", ns, "tier=db", check=False)
    assert refused.returncode == 1
    assert "'tier' already has a value (web), and --overwrite is false" in refused.stderr
    gateway.kubectl("label", grp.short, "a", "-n", ns, "tier=db", "--overwrite")
    got = json.loads(gateway.kubectl("get", grp.short, "a", "-n", ns, "-o", "json").stdout)
    assert got["metadata"]["labels"] == {"tier": "db"}
    assert got["metadata"]["annotations"]["owner"] == "me"
    assert gateway.kubectl("get", grp.short, "-n", ns, "-l", "tier", "-o", "name").stdout == \
        f"{kind}/a\n{kind}/b\n"
    rows = table(gateway.kubectl("get", grp.short, "-n", ns, "--show-labels").stdout)
    assert rows[0][-1] == "LABELS" and [r[0] for r in rows[1:]] == ["a", "b", "c"]
    assert [r[-1] for r in rows[1:]] == ["tier=db", "tier=web", "<none>"]
    out = gateway.kubectl("label", grp.short, "a", "-n", ns, "tier-").stdout
    assert out == f"{kind}/a unlabeled\n"

    out = gateway.kubectl("delete", grp.short, "-n", ns, "-l", "tier=web").stdout
    assert out == f'{kind} "b" deleted\n'
    assert gateway.kubectl("get", grp.short, "-n", ns, "-o", "name").stdout == \
        f"{kind}/a\n{kind}/c\n"
    out = gateway.kubectl("delete", grp.short, "-n", ns, "--all").stdout
    assert out == f'{kind} "a" deleted\n{kind} "c" deleted\n'
    empty = gateway.kubectl("get", grp.short, "-n", ns)
    assert empty.stdout == "" and empty.stderr.strip() == f"No resources found in {ns} namespace."


def test_kubectl_refuses_an_invalid_custom_resource(gateway, grp, ns):
    bad = grp.gadget("bad", ns, size="medium", replicas=-1)
    out = kubectl_apply(gateway, bad, check=False)
    assert out.returncode == 1
    assert out.stderr.strip() == (
        'The Gadget "bad" is invalid: \n'
        "* spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or "
        "equal to 0\n"
        '* spec.size: Unsupported value: "medium": supported values: "small", "large"')
    missing = grp.gadget("missing", ns)
    del missing["spec"]["size"]
    out = gateway.kubectl("create", "-f", "-", input=yaml.safe_dump(missing), check=False)
    assert out.returncode == 1
    assert out.stderr.strip() == \
        'The Gadget "missing" is invalid: spec.size: Required value'
    unknown = grp.gadget("strict", ns, colour="red")
    out = kubectl_apply(gateway, unknown, check=False)
    assert out.returncode == 1  # kubectl asks for strict field validation by default
    assert out.stderr.strip() == (
        'Error from server (BadRequest): error when creating "STDIN": Gadget in version "v1" '
        'cannot be handled as a Gadget: strict decoding error: unknown field "spec.colour"')


def test_kubectl_server_side_apply_of_custom_resources(gateway, grp, ns):
    """Each field manager owns the fields it applied, as the CRD's schema splits them."""
    kind = f"gadget.{grp.name}"
    out = kubectl_apply(gateway, grp.gadget("ssa", ns, replicas=2),
                        extra=("--server-side", "--field-manager=alice")).stdout
    assert out == f"{kind}/ssa serverside-applied\n"
    bob = {"apiVersion": f"{grp.name}/v1", "kind": "Gadget",
           "metadata": {"name": "ssa", "namespace": ns}, "spec": {"image": "nginx"}}
    out = kubectl_apply(gateway, bob, extra=("--server-side", "--field-manager=bob"),
                        check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{kind}/ssa serverside-applied\n"
    got = json.loads(gateway.kubectl("get", grp.short, "ssa", "-n", ns, "-o", "json").stdout)
    assert got["spec"] == {"size": "small", "replicas": 2, "image": "nginx"}

    bob["spec"]["size"] = "large"
    out = kubectl_apply(gateway, bob, extra=("--server-side", "--field-manager=bob"),
                        check=False)
    assert out.returncode == 1
    assert 'Apply failed with 1 conflict: conflict with "alice": .spec.size' in out.stderr
    out = kubectl_apply(gateway, bob, extra=("--server-side", "--field-manager=bob",
                                             "--force-conflicts"))
    assert out.stdout == f"{kind}/ssa serverside-applied\n"

    # alice no longer applies replicas: it is removed, being hers alone
    alice = grp.gadget("ssa", ns)
    del alice["spec"]["size"]
    alice["spec"]["replicas"] = 2
    kubectl_apply(gateway, alice, extra=("--server-side", "--field-manager=alice"))
    got = json.loads(gateway.kubectl("get", grp.short, "ssa", "-n", ns, "-o", "json").stdout)
    assert got["spec"] == {"size": "large", "replicas": 2, "image": "nginx"}


def test_kubectl_cluster_scoped_custom_resources(gateway, grp):
    name = f"t-{uuid.uuid4().hex[:6]}"
    kind = f"thingamajig.{grp.name}"
    thing = {"apiVersion": f"{grp.name}/v1", "kind": "Thingamajig",
             "metadata": {"name": name}, "spec": {"whatever": [1, 2, 3]}}
    assert kubectl_apply(gateway, thing).stdout == f"{kind}/{name} created\n"
    rows = table(gateway.kubectl("get", f"thingamajigs.{grp.name}", name).stdout)
    assert rows[0] == ["NAME", "AGE"] and rows[1][0] == name
    assert re.fullmatch(r"\d+s", rows[1][1]), rows
    got = json.loads(gateway.kubectl("get", kind, name, "-o", "json").stdout)
    assert got["spec"] == {"whatever": [1, 2, 3]} and "namespace" not in got["metadata"]
    assert gateway.kubectl("delete", kind, name).stdout == f'{kind} "{name}" deleted\n'

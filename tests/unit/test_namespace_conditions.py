"""The namespace deleter's conditions, as kube words and orders them (its
status_condition_utils cases), and kube's rule for lastTransitionTime."""

from __future__ import annotations

from gateway.controllers.namespaces import (
    CONDITION_TYPES,
    ContentTotals,
    updated_conditions,
    wanted_conditions,
)


def test_nothing_left_is_every_condition_false():
    wanted = wanted_conditions(ContentTotals())
    assert list(wanted) == [
        "NamespaceDeletionDiscoveryFailure", "NamespaceDeletionGroupVersionParsingFailure",
        "NamespaceDeletionContentFailure", "NamespaceContentRemaining",
        "NamespaceFinalizersRemaining"]
    assert {kind: state for kind, (state, _, _) in wanted.items()} == dict.fromkeys(
        CONDITION_TYPES, "False")
    assert wanted["NamespaceFinalizersRemaining"] == (
        "False", "ContentHasNoFinalizers", "All content-preserving finalizers finished")


def test_remaining_content_and_finalizers_are_sorted_and_counted():
    wanted = wanted_conditions(ContentTotals(
        remaining={"deployments.apps.k8s.io": 5, "daemonsets.apps.k8s.io": 5,
                   "secrets.": 0},
        finalizers={"service-catalog": 6, "kubedb": 5}))
    assert wanted["NamespaceContentRemaining"] == (
        "True", "SomeResourcesRemain",
        "Some resources are remaining: daemonsets.apps.k8s.io has 5 resource instances, "
        "deployments.apps.k8s.io has 5 resource instances")
    assert wanted["NamespaceFinalizersRemaining"] == (
        "True", "SomeFinalizersRemain",
        "Some content in the namespace has finalizers remaining: kubedb in 5 resource "
        "instances, service-catalog in 6 resource instances")
    assert wanted["NamespaceDeletionContentFailure"][0] == "False"


def test_failures_are_sorted_and_counted():
    wanted = wanted_conditions(ContentTotals(errors=[
        "unexpected items still remain in namespace: ns for gvr: /v1, Resource=secrets",
        "admission webhook \"x\" denied the request: no"]))
    assert wanted["NamespaceDeletionContentFailure"] == (
        "True", "ContentDeletionFailed",
        "Failed to delete all resource types, 2 remaining: admission webhook \"x\" denied the "
        "request: no, unexpected items still remain in namespace: ns for gvr: /v1, "
        "Resource=secrets")


def test_transition_time_moves_only_with_the_status():
    first = updated_conditions([], wanted_conditions(ContentTotals(
        remaining={"configmaps.": 2}, finalizers={"a/b": 2})), "T1")
    assert first is not None and [c["lastTransitionTime"] for c in first] == ["T1"] * 5
    assert updated_conditions(first, wanted_conditions(ContentTotals(
        remaining={"configmaps.": 2}, finalizers={"a/b": 2})), "T2") is None, "no change"

    fewer = updated_conditions(first, wanted_conditions(ContentTotals(
        remaining={"configmaps.": 1}, finalizers={"a/b": 1})), "T2")
    assert fewer is not None
    assert [c["lastTransitionTime"] for c in fewer] == ["T1"] * 5
    assert fewer[3]["message"] == "Some resources are remaining: configmaps. has 1 resource " \
                                  "instances"

    done = updated_conditions(fewer, wanted_conditions(ContentTotals()), "T3")
    assert done is not None
    assert [c["lastTransitionTime"] for c in done] == ["T1", "T1", "T1", "T3", "T3"]


def test_other_conditions_are_kept_in_place():
    other = {"type": "Other", "status": "True", "reason": "R", "message": "m",
             "lastTransitionTime": "T0"}
    updated = updated_conditions([other], wanted_conditions(ContentTotals()), "T1")
    assert updated is not None and updated[0] == other and len(updated) == 6


def test_discovery_failures_are_counted_in_client_gos_words():
    wanted = wanted_conditions(ContentTotals(discovery_failures={
        "wardle.example.com/v1alpha1": "stale GroupVersion discovery: wardle.example.com/v1alpha1",
        "metrics.k8s.io/v1beta1": "stale GroupVersion discovery: metrics.k8s.io/v1beta1"}))
    assert wanted["NamespaceDeletionDiscoveryFailure"] == (
        "True", "DiscoveryFailed",
        "Discovery failed for some groups, 2 failing: unable to retrieve the complete list of "
        "server APIs: metrics.k8s.io/v1beta1: stale GroupVersion discovery: "
        "metrics.k8s.io/v1beta1, wardle.example.com/v1alpha1: stale GroupVersion discovery: "
        "wardle.example.com/v1alpha1")
    assert not ContentTotals(discovery_failures={"a/v1": "x"}).done

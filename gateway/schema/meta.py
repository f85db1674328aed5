"""Schemas of k8s.io/apimachinery's meta/v1 types that every object and list refers to.

Names, types and list metadata follow Kubernetes v1.32; the descriptions are the gateway's own.
"""

from __future__ import annotations

from gateway.schema.dsl import (
    META,
    array,
    boolean,
    define,
    integer,
    kind_fields,
    map_of,
    meta_ref,
    obj,
    ref,
    string,
)

define("io.k8s.apimachinery.pkg.util.intstr.IntOrString", {
    "type": "string",
    "format": "int-or-string",
    "x-kubernetes-int-or-string": True,
    "description": "Either a whole number or a string (a port number or a port name, say).",
})
define(f"{META}.Time", string(
    "A moment in time, written as RFC 3339 with second precision.", format="date-time"))
define(f"{META}.MicroTime", string(
    "A moment in time, written as RFC 3339 with microsecond precision.", format="date-time"))
define(f"{META}.FieldsV1", obj(
    "A set of fields as a JSON tree: 'f:<name>' for a field, 'k:<keys>' for a list item by "
    "its keys, 'v:<value>' for a set member, 'i:<index>' for a list item by position, and "
    "'.' for the node itself."))

define(f"{META}.ManagedFieldsEntry", obj(
    "Which fields one manager set, through which operation and API version.",
    apiVersion=string("The API version the fields are expressed in."),
    fieldsType=string("How fieldsV1 is encoded; always \"FieldsV1\"."),
    fieldsV1=meta_ref("FieldsV1", "The fields this manager owns."),
    manager=string("Who set the fields: a field manager's name."),
    operation=string("Apply (server-side apply) or Update (any other write)."),
    subresource=string("The subresource written through, or empty for the object itself."),
    time=meta_ref("Time", "When this entry last changed."),
))

define(f"{META}.OwnerReference", obj(
    "Names an object this one belongs to; the owner is in the same namespace or "
    "cluster-scoped.",
    required=("apiVersion", "kind", "name", "uid"),
    apiVersion=string("API version of the owner."),
    blockOwnerDeletion=boolean("When true, a foreground deletion of the owner waits for "
                               "this reference to go."),
    controller=boolean("When true, the owner is the controller managing this object."),
    kind=string("Kind of the owner."),
    name=string("Name of the owner."),
    uid=string("UID of the owner."),
    map_type="atomic",
))

define(f"{META}.ObjectMeta", obj(
    "Identity and bookkeeping every stored object carries.",
    annotations=map_of(string(), "Free-form key-value data for tools; not used to select "
                       "objects."),
    creationTimestamp=meta_ref("Time", "When the server stored the object first; set by "
                               "the server."),
    deletionGracePeriodSeconds=integer("The grace period asked for when deletion began; set "
                                       "together with deletionTimestamp.", format="int64"),
    deletionTimestamp=meta_ref("Time", "When deletion was asked for; the object stays until "
                               "its finalizers are gone. Set by the server."),
    finalizers=array(string(), "Names of the components that must finish their clean-up "
                     "before the object may be removed.", list_type="set",
                     patch_strategy="merge"),
    generateName=string("A prefix from which the server makes a unique name when name is "
                        "empty."),
    generation=integer("Counts changes to the desired state; set by the server.",
                       format="int64"),
    labels=map_of(string(), "Key-value pairs that objects are selected by."),
    managedFields=array(meta_ref("ManagedFieldsEntry"), "Which manager set which fields; "
                        "kept by the server.", list_type="atomic"),
    name=string("The object's name, unique among its kind in its namespace; fixed once set."),
    namespace=string("The namespace the object lives in; fixed once set."),
    ownerReferences=array(meta_ref("OwnerReference"), "The objects this one belongs to.",
                          list_type="map", map_keys=["uid"], patch_strategy="merge",
                          merge_key="uid"),
    resourceVersion=string("An opaque marker of the object's version, for optimistic "
                           "concurrency and for watching from; set by the server."),
    selfLink=string("No longer set; kept for compatibility."),
    uid=string("An identifier unique over space and time; set by the server on creation."),
))

define(f"{META}.ListMeta", obj(
    "Bookkeeping of a list response.",
    {
        "continue": string("A token for the next page, when there is one."),
        "remainingItemCount": integer("How many items the following pages hold, when "
                                      "known.", format="int64"),
        "resourceVersion": string("The version of the data the list shows."),
        "selfLink": string("No longer set; kept for compatibility."),
    },
))

define(f"{META}.StatusCause", obj(
    "One reason a request failed, often tied to a field.",
    field=string("The field at fault, as a JSON path, when there is one."),
    message=string("What is wrong, for people."),
    reason=string("What is wrong, for programs."),
))
define(f"{META}.StatusDetails", obj(
    "More about the object a Status is about.",
    causes=array(meta_ref("StatusCause"), "Every cause found.", list_type="atomic"),
    group=string("API group of the object."),
    kind=string("Kind (or resource) of the object."),
    name=string("Name of the object."),
    retryAfterSeconds=integer("How long to wait before trying again, when it is worth it."),
    uid=string("UID of the object."),
))
define(f"{META}.Status", obj(
    "The outcome of a request that returns no object: mostly an error.",
    kind_fields(),
    code=integer("The HTTP status code that goes with it."),
    details=meta_ref("StatusDetails", "What the status is about."),
    message=string("What happened, for people."),
    metadata=meta_ref("ListMeta", "Bookkeeping of the response."),
    reason=string("Why a failure happened, for programs (NotFound, Conflict, ...)."),
    status=string("Success or Failure."),
), gvk=("", "v1", "Status"))

define(f"{META}.Preconditions", obj(
    "What must be true of the stored object for a write to go ahead.",
    resourceVersion=string("The resourceVersion the object must have."),
    uid=string("The UID the object must have."),
))
define(f"{META}.DeleteOptions", obj(
    "How to delete an object.",
    kind_fields(),
    dryRun=array(string(), "\"All\" to check the request without deleting anything.",
                 list_type="atomic"),
    gracePeriodSeconds=integer("How long the object may take to go away.", format="int64"),
    orphanDependents=boolean("Old form of propagationPolicy: Orphan when true."),
    preconditions=meta_ref("Preconditions", "What must hold for the deletion to proceed."),
    propagationPolicy=string("What happens to dependents: Orphan, Background or "
                             "Foreground."),
), gvk=("", "v1", "DeleteOptions"))

define(f"{META}.LabelSelectorRequirement", obj(
    "One condition on a label.",
    required=("key", "operator"),
    key=string("The label the condition is about."),
    operator=string("In, NotIn, Exists or DoesNotExist."),
    values=array(string(), "The values In and NotIn compare with.", list_type="atomic"),
))
define(f"{META}.LabelSelector", obj(
    "A query over labels; every condition must hold.",
    matchExpressions=array(meta_ref("LabelSelectorRequirement"), "Conditions on labels.",
                           list_type="atomic"),
    matchLabels=map_of(string(), "Labels that must have exactly these values."),
    map_type="atomic",
))
define(f"{META}.Condition", obj(
    "One observed aspect of an object's state.",
    required=("type", "status", "lastTransitionTime", "reason", "message"),
    lastTransitionTime=meta_ref("Time", "When status last changed."),
    message=string("Details for people."),
    observedGeneration=integer("The generation the condition was computed from.",
                               format="int64"),
    reason=string("Why status last changed, in CamelCase."),
    status=string("True, False or Unknown."),
    type=string("The aspect described, in CamelCase."),
))
define(f"{META}.WatchEvent", obj(
    "One event of a watch stream.",
    required=("type", "object"),
    object=ref("io.k8s.apimachinery.pkg.runtime.RawExtension", "The object after the change "
               "(ADDED, MODIFIED), before it (DELETED), a bookmark, or a Status (ERROR)."),
    type=string("ADDED, MODIFIED, DELETED, BOOKMARK or ERROR."),
))
define("io.k8s.apimachinery.pkg.runtime.RawExtension", obj(
    "An embedded object of any kind."))

"""Schemas of k8s.io/apimachinery's meta/v1 types that every object and list refers to."""

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
    "description": "IntOrString is a type that can hold an int32 or a string.",
})
define(f"{META}.Time", string(
    "Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON. "
    "Wrappers are provided for many of the factory methods that the time package offers.",
    format="date-time"))
define(f"{META}.MicroTime", string(
    "MicroTime is version of Time with microsecond level precision.", format="date-time"))
define(f"{META}.FieldsV1", obj(
    "FieldsV1 stores a set of fields in a data structure like a Trie, in JSON format. Each key "
    "is either a '.' representing the field itself, and will always map to an empty set, or a "
    "string representing a sub-field or item. The string will follow one of these four "
    "formats: 'f:<name>', 'v:<value>', 'k:<keys>', 'i:<index>'."))

define(f"{META}.ManagedFieldsEntry", obj(
    "ManagedFieldsEntry is a workflow-id, a FieldSet and the group version of the resource "
    "that the fieldset applies to.",
    apiVersion=string("APIVersion defines the version of this resource that this field set "
                      "applies to."),
    fieldsType=string("FieldsType is the discriminator for the different fields format and "
                      "version. There is currently only one possible value: \"FieldsV1\""),
    fieldsV1=meta_ref("FieldsV1", "FieldsV1 holds the first JSON version format."),
    manager=string("Manager is an identifier of the workflow managing these fields."),
    operation=string("Operation is the type of operation which lead to this ManagedFieldsEntry "
                     "being created. The only valid values for this field are 'Apply' and "
                     "'Update'."),
    subresource=string("Subresource is the name of the subresource used to update that "
                       "object, or empty string if the object was updated through the main "
                       "resource."),
    time=meta_ref("Time", "Time is the timestamp of when the ManagedFields entry was added."),
))

define(f"{META}.OwnerReference", obj(
    "OwnerReference contains enough information to let you identify an owning object. An "
    "owning object must be in the same namespace as the dependent, or be cluster-scoped, so "
    "there is no namespace field.",
    required=("apiVersion", "kind", "name", "uid"),
    apiVersion=string("API version of the referent."),
    blockOwnerDeletion=boolean("If true, AND if the owner has the \"foregroundDeletion\" "
                               "finalizer, then the owner cannot be deleted from the key-value "
                               "store until this reference is removed."),
    controller=boolean("If true, this reference points to the managing controller."),
    kind=string("Kind of the referent."),
    name=string("Name of the referent."),
    uid=string("UID of the referent."),
    map_type="atomic",
))

define(f"{META}.ObjectMeta", obj(
    "ObjectMeta is metadata that all persisted resources must have, which includes all "
    "objects users must create.",
    annotations=map_of(string(), "Annotations is an unstructured key value map stored with a "
                       "resource that may be set by external tools to store and retrieve "
                       "arbitrary metadata. They are not queryable and should be preserved "
                       "when modifying objects."),
    creationTimestamp=meta_ref("Time", "CreationTimestamp is a timestamp representing the "
                               "server time when this object was created. Populated by the "
                               "system. Read-only. Null for lists."),
    deletionGracePeriodSeconds=integer("Number of seconds allowed for this object to "
                                       "gracefully terminate before it will be removed from "
                                       "the system. Only set when deletionTimestamp is also "
                                       "set.", format="int64"),
    deletionTimestamp=meta_ref("Time", "DeletionTimestamp is RFC 3339 date and time at which "
                               "this resource will be deleted. This field is set by the server "
                               "when a graceful deletion is requested by the user. Populated "
                               "by the system when a graceful deletion is requested. "
                               "Read-only."),
    finalizers=array(string(), "Must be empty before the object is deleted from the registry. "
                     "Each entry is an identifier for the responsible component that will "
                     "remove the entry from the list.", list_type="set",
                     patch_strategy="merge"),
    generateName=string("GenerateName is an optional prefix, used by the server, to generate "
                        "a unique name ONLY IF the Name field has not been provided."),
    generation=integer("A sequence number representing a specific generation of the desired "
                       "state. Populated by the system. Read-only.", format="int64"),
    labels=map_of(string(), "Map of string keys and values that can be used to organize and "
                  "categorize (scope and select) objects."),
    managedFields=array(meta_ref("ManagedFieldsEntry"), "ManagedFields maps workflow-id and "
                        "version to the set of fields that are managed by that workflow. This "
                        "is mostly for internal housekeeping, and users typically shouldn't "
                        "need to set or understand this field.", list_type="atomic"),
    name=string("Name must be unique within a namespace. Is required when creating resources, "
                "although some resources may allow a client to request the generation of an "
                "appropriate name automatically. Cannot be updated."),
    namespace=string("Namespace defines the space within which each name must be unique. "
                     "Cannot be updated."),
    ownerReferences=array(meta_ref("OwnerReference"), "List of objects depended by this "
                          "object.", list_type="map", map_keys=["uid"], patch_strategy="merge",
                          merge_key="uid"),
    resourceVersion=string("An opaque value that represents the internal version of this "
                           "object that can be used by clients to determine when objects have "
                           "changed. Populated by the system. Read-only."),
    selfLink=string("Deprecated: selfLink is a legacy read-only field that is no longer "
                    "populated by the system."),
    uid=string("UID is the unique in time and space value for this object. It is typically "
               "generated by the server on successful creation of a resource and is not "
               "allowed to change on PUT operations. Populated by the system. Read-only."),
))

define(f"{META}.ListMeta", obj(
    "ListMeta describes metadata that synthetic resources must have, including lists and "
    "various status objects.",
    **{
        "continue": string("continue may be set if the user set a limit on the number of "
                           "items returned, and indicates that the server has more data "
                           "available."),
        "remainingItemCount": integer("remainingItemCount is the number of subsequent items in "
                                      "the list which are not included in this list response.",
                                      format="int64"),
        "resourceVersion": string("String that identifies the server's internal version of "
                                  "this object that can be used by clients to determine when "
                                  "objects have changed."),
        "selfLink": string("Deprecated: selfLink is a legacy read-only field that is no longer "
                           "populated by the system."),
    },
))

define(f"{META}.StatusCause", obj(
    "StatusCause provides more information about an api.Status failure, including cases when "
    "multiple errors are encountered.",
    field=string("The field of the resource that has caused this error, as named by its JSON "
                 "serialization."),
    message=string("A human-readable description of the cause of the error."),
    reason=string("A machine-readable description of the cause of the error."),
))
define(f"{META}.StatusDetails", obj(
    "StatusDetails is a set of additional properties that MAY be set by the server to provide "
    "additional information about a response.",
    causes=array(meta_ref("StatusCause"), "The Causes array includes more details associated "
                 "with the StatusReason failure.", list_type="atomic"),
    group=string("The group attribute of the resource associated with the status "
                 "StatusReason."),
    kind=string("The kind attribute of the resource associated with the status StatusReason."),
    name=string("The name attribute of the resource associated with the status StatusReason."),
    retryAfterSeconds=integer("If specified, the time in seconds before the operation should "
                              "be retried."),
    uid=string("UID of the resource."),
))
define(f"{META}.Status", obj(
    "Status is a return value for calls that don't return other objects.",
    **kind_fields(),
    code=integer("Suggested HTTP return code for this status, 0 if not set."),
    details=meta_ref("StatusDetails", "Extended data associated with the reason."),
    message=string("A human-readable description of the status of this operation."),
    metadata=meta_ref("ListMeta", "Standard list metadata."),
    reason=string("A machine-readable description of why this operation is in the "
                  "\"Failure\" status."),
    status=string("Status of the operation. One of: \"Success\" or \"Failure\"."),
), gvk=("", "v1", "Status"))

define(f"{META}.Preconditions", obj(
    "Preconditions must be fulfilled before an operation (update, delete, etc.) is carried "
    "out.",
    resourceVersion=string("Specifies the target ResourceVersion"),
    uid=string("Specifies the target UID."),
))
define(f"{META}.DeleteOptions", obj(
    "DeleteOptions may be provided when deleting an API object.",
    **kind_fields(),
    dryRun=array(string(), "When present, indicates that modifications should not be "
                 "persisted.", list_type="atomic"),
    gracePeriodSeconds=integer("The duration in seconds before the object should be deleted.",
                               format="int64"),
    orphanDependents=boolean("Deprecated: please use the PropagationPolicy."),
    preconditions=meta_ref("Preconditions", "Must be fulfilled before a deletion is carried "
                           "out."),
    propagationPolicy=string("Whether and how garbage collection will be performed. "
                             "Acceptable values are: 'Orphan', 'Background', 'Foreground'."),
), gvk=("", "v1", "DeleteOptions"))

define(f"{META}.LabelSelectorRequirement", obj(
    "A label selector requirement is a selector that contains values, a key, and an operator "
    "that relates the key and values.",
    required=("key", "operator"),
    key=string("key is the label key that the selector applies to."),
    operator=string("operator represents a key's relationship to a set of values. Valid "
                    "operators are In, NotIn, Exists and DoesNotExist."),
    values=array(string(), "values is an array of string values.", list_type="atomic"),
))
define(f"{META}.LabelSelector", obj(
    "A label selector is a label query over a set of resources.",
    matchExpressions=array(meta_ref("LabelSelectorRequirement"), "matchExpressions is a list "
                           "of label selector requirements. The requirements are ANDed.",
                           list_type="atomic"),
    matchLabels=map_of(string(), "matchLabels is a map of {key,value} pairs."),
    map_type="atomic",
))
define(f"{META}.Condition", obj(
    "Condition contains details for one aspect of the current state of this API Resource.",
    required=("type", "status", "lastTransitionTime", "reason", "message"),
    lastTransitionTime=meta_ref("Time", "lastTransitionTime is the last time the condition "
                                "transitioned from one status to another."),
    message=string("message is a human readable message indicating details about the "
                   "transition."),
    observedGeneration=integer("observedGeneration represents the .metadata.generation that "
                               "the condition was set based upon.", format="int64"),
    reason=string("reason contains a programmatic identifier indicating the reason for the "
                  "condition's last transition."),
    status=string("status of the condition, one of True, False, Unknown."),
    type=string("type of condition in CamelCase or in foo.example.com/CamelCase."),
))
define(f"{META}.WatchEvent", obj(
    "Event represents a single event to a watched resource.",
    required=("type", "object"),
    object=ref("io.k8s.apimachinery.pkg.runtime.RawExtension", "Object is: * If Type is Added "
               "or Modified: the new state of the object. * If Type is Deleted: the state of "
               "the object immediately before deletion. * If Type is Error: *Status is "
               "recommended; other types may make sense depending on context."),
    type=string(),
))
define("io.k8s.apimachinery.pkg.runtime.RawExtension", obj(
    "RawExtension is used to hold extensions in external versions."))

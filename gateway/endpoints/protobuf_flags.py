"""The words of the protobuf field tables (protobuf_types, protobuf_types_ext): the package
prefixes of kube's message names and the flags a field may carry. Kept apart so that each
table module can use them without importing the other."""

from __future__ import annotations

META = "k8s.io.apimachinery.pkg.apis.meta.v1."
META_V1BETA1 = "k8s.io.apimachinery.pkg.apis.meta.v1beta1."
CORE = "k8s.io.api.core.v1."
API = "k8s.io.api."
AM = "k8s.io.apimachinery.pkg."
#: The packages of the two extension servers kube-apiserver embeds; their groups' messages are
#: not under k8s.io.api (Go's package path, dashes made underscores, is the proto package).
APIEXTENSIONS = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions."
APIREGISTRATION = "k8s.io.kube_aggregator.pkg.apis.apiregistration."
MAP = "map:"
REPEATED = "repeated"
INLINE = "inline"  # an embedded struct: its fields appear in the parent's JSON
#: A field that is a pointer in Go (*bool, *int32, *string, *LabelSelector, *Time...): set
#: whenever it is on the wire, so a present false, 0, "" or {} is kept, not dropped as unset;
#: written only when the object has it.
OPTIONAL = "optional"

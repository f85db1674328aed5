"""Admission as the store sees it: the attributes of a write, and the chain it is given.

The store never imports an admission plugin. It builds ``Attributes`` for each write and hands
them to the ``Admitter`` it was built with (gateway.admission.chain: mutating webhooks, then
ValidatingAdmissionPolicies and validating webhooks), as kube's registry sees only
admission.Interface. The chain is made of plugins that mutate (``MutatingPlugin``) or
validate (``ValidatingPlugin``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from gateway.apimachinery.user import UserInfo
from gateway.registry.resource import ResourceDef

Object = dict[str, Any]

#: Webhook configurations are never sent to webhooks, so a bad one can always be removed.
EXEMPT = frozenset({
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
})


@dataclass
class Attributes:
    """One write as admission sees it."""

    operation: str  # CREATE, UPDATE or DELETE
    resource: ResourceDef
    subresource: str
    namespace: str
    name: str
    obj: Object | None
    old: Object | None
    user: UserInfo | None
    dry_run: bool
    options: Object = field(default_factory=dict)
    #: Warning headers for the response; webhooks may add to them.
    warnings: list[str] = field(default_factory=list)
    #: The object's group/version/kind when it is not the resource's (TokenRequest, Scale).
    kind: dict[str, str] | None = None
    #: Other versions the same objects are served at (a CRD's served versions): a webhook
    #: whose rules name one of them is called at that version (matchPolicy Equivalent).
    equivalent_versions: tuple[str, ...] = ()
    #: Converts an object of the resource to another of its versions ("group/version").
    convert: Callable[[Object, str], Awaitable[Object]] | None = None
    #: The version a webhook is called at, when it is not the request's.
    matched_version: str = ""
    #: Audit annotations the plugins add (they go into the request's audit event).
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def exempt(self) -> bool:
        return (self.resource.group, self.resource.plural) in EXEMPT

    def add_annotation(self, key: str, value: str) -> bool:
        """Record an audit annotation; one already set to another value is kept (kube's
        AddAnnotation refuses to overwrite it)."""
        if self.annotations.get(key, value) != value:
            return False
        self.annotations[key] = value
        return True


class SubresourceView(Protocol):
    """What admission sees of a subresource whose object is not the resource's own (a custom
    resource's ``scale``: an autoscaling/v1 Scale made from the object)."""

    #: The view's group, version and kind, as admission reviews name it.
    kind: dict[str, str]

    def view(self, obj: Object) -> Object:
        """The view of a whole object."""
        ...

    def apply(self, view: Object, obj: Object) -> Object:
        """A copy of ``obj`` with what a (mutated) view may change written into it."""
        ...


class MutatingPlugin(Protocol):
    """An admission plugin that may change the object (kube's MutationInterface)."""

    @property
    def configured(self) -> bool:
        """Whether it could act on anything (a plugin with no configuration is skipped)."""
        ...

    async def mutate(self, attrs: Attributes) -> Object | None:
        """The changed object (None when it did not change it)."""
        ...


class ValidatingPlugin(Protocol):
    """An admission plugin that accepts or refuses a write (kube's ValidationInterface)."""

    @property
    def configured(self) -> bool:
        ...

    async def validate(self, attrs: Attributes) -> None:
        """Return, or raise the StatusError that refuses the write."""
        ...


class Admitter(Protocol):
    """The admission chain a store is built with: mutating, then validating admission."""

    @property
    def configured(self) -> bool:
        """Whether any plugin could act (no call is made when none could)."""
        ...

    async def admit(self, attrs: Attributes,
                    recheck: Callable[[Object], Object] | None = None) -> Object | None:
        """The object as it is to be written; ``recheck`` validates a mutated one again."""
        ...

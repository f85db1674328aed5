"""The admission chain every store is built with: mutating plugins, then validating ones, in
kube-apiserver's order (MutatingAdmissionWebhook; then ValidatingAdmissionPolicy,
ValidatingAdmissionWebhook).

An object a mutating plugin changed is checked again (the store's ``recheck``) before any
validating plugin sees it. The audit annotations the plugins add go into the request's audit
event whatever the outcome, as kube's admission audit handler logs them after each call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gateway.auth.audit.events import add_annotations
from gateway.registry.admission import Attributes, MutatingPlugin, Object, ValidatingPlugin


class AdmissionChain:
    """kube's admission chain (admission.Interface), as the store's ``Admitter``."""

    def __init__(self, mutating: Sequence[MutatingPlugin],
                 validating: Sequence[ValidatingPlugin]) -> None:
        self.mutating = list(mutating)
        self.validating = list(validating)

    @property
    def configured(self) -> bool:
        return any(p.configured for p in self.mutating) or \
            any(p.configured for p in self.validating)

    async def admit(self, attrs: Attributes,
                    recheck: Callable[[Object], Object] | None = None) -> Object | None:
        """Mutating plugins one after another, the changed object checked again, then the
        validating plugins; the object as it is to be written."""
        try:
            changed = False
            for plugin in self.mutating:
                if plugin.configured and (mutated := await plugin.mutate(attrs)) is not None:
                    attrs.obj, changed = mutated, True
            if changed and recheck is not None and attrs.obj is not None:
                attrs.obj = recheck(attrs.obj)
            for validator in self.validating:
                if validator.configured:
                    await validator.validate(attrs)
            return attrs.obj
        finally:
            add_annotations(attrs.annotations)

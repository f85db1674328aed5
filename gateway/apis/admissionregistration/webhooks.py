"""admissionregistration.k8s.io/v1 validating and mutating webhook configurations: stored,
defaulted, validated and served. The webhooks are called on writes by gateway.admission."""

from __future__ import annotations

import re

from gateway.admission.conditions import compile_error
from gateway.endpoints.status import Cause
from gateway.registry.labels import qualified_name_errors
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import invalid, required

_QUALIFIED = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?){2,}$")
REVIEW_VERSIONS = ("v1", "v1beta1")
MAX_MATCH_CONDITIONS = 64
SIDE_EFFECTS = ("None", "NoneOnDryRun")


class WebhookConfigurationStrategy(Strategy):
    has_generation = True

    def __init__(self, mutating: bool) -> None:
        self.mutating = mutating

    def prepare_for_create(self, obj: Object) -> None:
        for webhook in obj.get("webhooks") or []:
            self._default(webhook)

    def prepare_for_update(self, new: Object, old: Object) -> None:
        self.prepare_for_create(new)

    def _default(self, webhook: dict) -> None:
        webhook.setdefault("failurePolicy", "Fail")
        webhook.setdefault("matchPolicy", "Equivalent")
        webhook.setdefault("namespaceSelector", {})
        webhook.setdefault("objectSelector", {})
        webhook.setdefault("timeoutSeconds", 10)
        if self.mutating:
            webhook.setdefault("reinvocationPolicy", "Never")
        for rule in webhook.get("rules") or []:
            rule.setdefault("scope", "*")
        service = (webhook.get("clientConfig") or {}).get("service")
        if isinstance(service, dict):
            service.setdefault("port", 443)

    def validate(self, obj: Object) -> list[Cause]:
        causes: list[Cause] = []
        seen: set[str] = set()
        for i, webhook in enumerate(obj.get("webhooks") or []):
            causes += _webhook_causes(f"webhooks[{i}]", webhook, seen)
        return causes


def _webhook_causes(path: str, webhook: dict, seen: set[str]) -> list[Cause]:
    causes: list[Cause] = []
    name = webhook.get("name") or ""
    if not name:
        causes.append(required(f"{path}.name"))
    elif not _QUALIFIED.match(name):
        causes.append(invalid(f"{path}.name", name, "should be a domain with at least three "
                              "segments separated by dots"))
    elif name in seen:
        causes.append(Cause("FieldValueDuplicate", f'Duplicate value: "{name}"', f"{path}.name"))
    seen.add(name)
    versions = webhook.get("admissionReviewVersions") or []
    if not versions:
        causes.append(required(f"{path}.admissionReviewVersions", "must specify one of v1, "
                               "v1beta1"))
    elif not set(versions) & set(REVIEW_VERSIONS):
        causes.append(invalid(f"{path}.admissionReviewVersions", str(versions), "must include "
                              "at least one of v1, v1beta1"))
    effects = webhook.get("sideEffects")
    if effects is None:
        causes.append(required(f"{path}.sideEffects", "must specify one of None, "
                               "NoneOnDryRun"))
    elif effects not in SIDE_EFFECTS:
        causes.append(Cause("FieldValueNotSupported", f'Unsupported value: "{effects}": '
                            'supported values: "None", "NoneOnDryRun"', f"{path}.sideEffects"))
    causes += _client_config_causes(f"{path}.clientConfig", webhook.get("clientConfig") or {})
    timeout = webhook.get("timeoutSeconds", 10)
    if not isinstance(timeout, int) or not 1 <= timeout <= 30:
        causes.append(invalid(f"{path}.timeoutSeconds", str(timeout), "the timeout value must "
                              "be between 1 and 30 seconds"))
    causes += _match_condition_causes(f"{path}.matchConditions",
                                      webhook.get("matchConditions") or [])
    return causes


def _match_condition_causes(path: str, conditions: list[dict]) -> list[Cause]:
    """Named, unique, at most 64, and each expression must compile."""
    if len(conditions) > MAX_MATCH_CONDITIONS:
        return [Cause("FieldValueTooMany", f"Too many: {len(conditions)}: must have at most "
                      f"{MAX_MATCH_CONDITIONS} items", path)]
    causes: list[Cause] = []
    names: set[str] = set()
    for i, condition in enumerate(conditions):
        name, expression = condition.get("name") or "", condition.get("expression") or ""
        if not name:
            causes.append(required(f"{path}[{i}].name"))
        elif name in names:
            causes.append(Cause("FieldValueDuplicate", f'Duplicate value: "{name}"',
                                f"{path}[{i}].name"))
        else:
            causes += [invalid(f"{path}[{i}].name", name, e) for e in qualified_name_errors(name)]
        names.add(name)
        if not expression:
            causes.append(required(f"{path}[{i}].expression"))
        elif error := compile_error(expression):
            causes.append(invalid(f"{path}[{i}].expression", expression,
                                  f"compilation failed: {error}"))
    return causes


def _client_config_causes(path: str, config: dict) -> list[Cause]:
    url, service = config.get("url"), config.get("service")
    if bool(url) == bool(service):
        return [required(path, "exactly one of url or service is required")]
    if url and not str(url).startswith("https://"):
        return [invalid(f"{path}.url", str(url), "'https' is the only allowed URL scheme")]
    if service and (not service.get("name") or not service.get("namespace")):
        return [required(f"{path}.service", "name and namespace are required")]
    return []


def _count(obj: Object) -> int:
    return len(obj.get("webhooks") or [])


def _definition(kind: str, plural: str, mutating: bool) -> ResourceDef:
    return ResourceDef(
        group="admissionregistration.k8s.io", version="v1", kind=kind, plural=plural,
        singular=kind.lower(), namespaced=False,
        strategy=WebhookConfigurationStrategy(mutating), categories=("api-extensions",),
        columns=(NAME, Column("Webhooks", "integer", "Number of webhooks.", _count), AGE),
        schema=f"io.k8s.api.admissionregistration.v1.{kind}",
    )


VALIDATING = _definition("ValidatingWebhookConfiguration", "validatingwebhookconfigurations",
                         mutating=False)
MUTATING = _definition("MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
                       mutating=True)

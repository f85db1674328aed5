"""admissionregistration.k8s.io/v1 validating and mutating webhook configurations: stored,
defaulted, validated and served. The webhooks are called on writes by gateway.admission."""

from __future__ import annotations

from gateway.admission.conditions import compile_error
from gateway.apimachinery.labels import qualified_name_errors
from gateway.apimachinery.objects import drop_nulls
from gateway.apimachinery.status import Cause
from gateway.registry.resource import ResourceDef
from gateway.registry.strategy import Object, Strategy
from gateway.registry.tables import AGE, NAME, Column
from gateway.registry.validation import (
    dns1035_label_errors,
    dns1123_subdomain_errors,
    duplicate,
    invalid,
    not_supported,
    required,
)
from gateway.registry.webhookclient import service_causes, url_causes

REVIEW_VERSIONS = ("v1", "v1beta1")
MAX_MATCH_CONDITIONS = 64
#: The supported values, in the (sorted) order kube lists them.
SIDE_EFFECTS = ("None", "NoneOnDryRun")
FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Equivalent", "Exact")
REINVOCATION_POLICIES = ("IfNeeded", "Never")


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
        """kube's SetDefaults_*Webhook: a field absent or null (Go decodes a null pointer field
        as nil, which defaulting then fills) gets its default."""
        _default(webhook, "failurePolicy", "Fail")
        _default(webhook, "matchPolicy", "Equivalent")
        _default(webhook, "namespaceSelector", {})
        _default(webhook, "objectSelector", {})
        _default(webhook, "timeoutSeconds", 10)
        if self.mutating:
            _default(webhook, "reinvocationPolicy", "Never")
        for rule in webhook.get("rules") or []:
            _default(rule, "scope", "*")
        service = (webhook.get("clientConfig") or {}).get("service")
        if isinstance(service, dict):
            _default(service, "port", 443)
        drop_nulls(webhook)  # the other fields are omitted when nil

    def validate(self, obj: Object) -> list[Cause]:
        """validate{Validating,Mutating}WebhookConfiguration: for each webhook, its own fields,
        then its admissionReviewVersions, then whether its name was used before."""
        causes: list[Cause] = []
        seen: set[str] = set()
        for i, webhook in enumerate(obj.get("webhooks") or []):
            path = f"webhooks[{i}]"
            causes += _webhook_causes(path, webhook, self.mutating)
            causes += _review_version_causes(f"{path}.admissionReviewVersions",
                                             webhook.get("admissionReviewVersions") or [])
            name = webhook.get("name") or ""
            if name and name in seen:
                causes.append(duplicate(f"{path}.name", name))
            seen.add(name)
        return causes


def _default(fields: dict, key: str, value: object) -> None:
    if fields.get(key) is None:
        fields[key] = value


def _webhook_causes(path: str, webhook: dict, mutating: bool) -> list[Cause]:
    """validate{Validating,Mutating}Webhook, in kube's order: name, policies, side effects,
    timeout, (reinvocation), client config, match conditions."""
    causes = _fully_qualified_name_causes(f"{path}.name", webhook.get("name") or "")
    for field, supported in (("failurePolicy", FAILURE_POLICIES),
                             ("matchPolicy", MATCH_POLICIES)):
        value = webhook.get(field)
        if value is not None and value not in supported:
            causes.append(not_supported(f"{path}.{field}", value, supported))
    effects = webhook.get("sideEffects")
    if effects is None:
        causes.append(required(f"{path}.sideEffects", "must specify one of None, "
                               "NoneOnDryRun"))
    elif effects not in SIDE_EFFECTS:
        causes.append(not_supported(f"{path}.sideEffects", effects, SIDE_EFFECTS))
    timeout = webhook.get("timeoutSeconds")
    if timeout is not None and not 1 <= timeout <= 30:
        causes.append(invalid(f"{path}.timeoutSeconds", timeout, "the timeout value must "
                              "be between 1 and 30 seconds"))
    policy = webhook.get("reinvocationPolicy")
    if mutating and policy is not None and policy not in REINVOCATION_POLICIES:
        causes.append(not_supported(f"{path}.reinvocationPolicy", policy,
                                    REINVOCATION_POLICIES))
    causes += _client_config_causes(f"{path}.clientConfig", webhook.get("clientConfig") or {})
    causes += _match_condition_causes(f"{path}.matchConditions",
                                      webhook.get("matchConditions") or [])
    return causes


def _fully_qualified_name_causes(path: str, name: str) -> list[Cause]:
    """validation.IsFullyQualifiedName: a DNS-1123 subdomain of at least three labels."""
    if not name:
        return [required(path)]
    if errors := dns1123_subdomain_errors(name):
        return [invalid(path, name, ",".join(errors))]
    if len(name.split(".")) < 3:
        return [invalid(path, name, "should be a domain with at least three segments "
                        "separated by dots")]
    return []


def _review_version_causes(path: str, versions: list[str]) -> list[Cause]:
    """validateAdmissionReviewVersions: at least one, no repeats, DNS-1035 labels, and one the
    server speaks."""
    if not versions:
        return [required(path, "must specify one of v1, v1beta1")]
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, version in enumerate(versions):
        if version in seen:
            causes.append(invalid(f"{path}[{i}]", version, "duplicate version"))
            continue
        seen.add(version)
        causes += [invalid(f"{path}[{i}]", version, e) for e in dns1035_label_errors(version)]
    if not seen & set(REVIEW_VERSIONS):
        causes.append(invalid(path, versions, "must include at least one of v1, v1beta1"))
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
            causes.append(invalid(f"{path}[{i}].expression", expression, error))
    return causes


def _client_config_causes(path: str, config: dict) -> list[Cause]:
    """Exactly one of url (ValidateWebhookURL, https only) and service
    (ValidateWebhookService)."""
    url, service = config.get("url"), config.get("service")
    if (url is None) == (service is None):
        return [required(path, "exactly one of url or service is required")]
    if url is not None:
        return url_causes(f"{path}.url", url)
    assert service is not None  # exactly one of them is set
    return service_causes(f"{path}.service", service)


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

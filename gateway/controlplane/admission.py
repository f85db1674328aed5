"""The admission chain every store is built with (kube-apiserver's admission options): mutating
webhooks, then ValidatingAdmissionPolicies and validating webhooks. The plugins read their
configuration from watch caches (listers), not from stores, so the chain is made before any
store and given to each as it is built (StoreOptions)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gateway.admission.attributes import cel_authorizer
from gateway.admission.chain import AdmissionChain
from gateway.admission.policy.plugin import ValidatingAdmissionPolicy
from gateway.admission.policy.served import ServedResources
from gateway.admission.webhooks import WebhookAdmission
from gateway.apis.admissionregistration.policies import (
    VALIDATING_ADMISSION_POLICIES,
    VALIDATING_ADMISSION_POLICY_BINDINGS,
)
from gateway.apis.admissionregistration.webhooks import MUTATING, VALIDATING
from gateway.apis.core.namespaces import NAMESPACES, lifecycle_admission
from gateway.auth.authorizer import Authorizer
from gateway.registry.lister import lister_for
from gateway.registry.options import StoreOptions
from gateway.server.genericapiserver import GenericAPIServer
from gateway.storage.factory import StorageFactory
from gateway.transport.clients import ClientManager
from gateway.transport.resolver import ServiceResolver


@dataclass
class Admission:
    """The plugins, and the store options that carry them to every store."""

    webhooks: WebhookAdmission
    policies: ValidatingAdmissionPolicy
    store_options: StoreOptions


def new_admission(factory: StorageFactory, *, resolver: ServiceResolver,
                  clients: ClientManager, authorize: Authorizer,
                  servers: Callable[[], Iterable[GenericAPIServer]]) -> Admission:
    """Webhooks called through the one outgoing client; policies' params read from the
    stores the ``servers`` serve; CEL's ``authorizer`` answered by ``authorize``; every
    configuration counts from the moment its write returns (read-your-writes caches)."""
    namespaces = lister_for(factory, NAMESPACES)
    authorizer = cel_authorizer(authorize)
    webhooks = WebhookAdmission(
        lister_for(factory, MUTATING, read_your_writes=True),
        lister_for(factory, VALIDATING, read_your_writes=True),
        namespaces, resolver, clients, authorizer)
    policies = ValidatingAdmissionPolicy(
        lister_for(factory, VALIDATING_ADMISSION_POLICIES, read_your_writes=True),
        lister_for(factory, VALIDATING_ADMISSION_POLICY_BINDINGS, read_your_writes=True),
        namespaces, ServedResources(servers), authorizer)
    chain = AdmissionChain(mutating=[webhooks], validating=[policies, webhooks])
    return Admission(webhooks, policies, StoreOptions(
        factory, admission=chain, create_admission=lifecycle_admission(namespaces)))

"""Authentication and authorization, built before any store (kube builds its authorizer and
authenticators from informers before the servers): RBAC reads the watch caches of roles and
bindings, and service-account tokens are checked against the caches of service accounts and
secrets, so every store can be built knowing the authorizer (RBAC's escalation check, CEL's
``authorizer``)."""

from __future__ import annotations

from gateway.apis.core.secrets import SECRETS
from gateway.apis.core.serviceaccounts import SERVICEACCOUNTS
from gateway.apis.rbac.resources import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    ROLE_BINDINGS,
    ROLES,
)
from gateway.auth.authn.serviceaccount import UidLookup
from gateway.auth.rbac.authorizer import RBAC, RBACCaches
from gateway.auth.security import Security, build_security
from gateway.options import ServeOptions
from gateway.registry.lister import lister_for
from gateway.storage.apierrors import from_storage_error
from gateway.storage.errors import KeyNotFoundError, StorageError
from gateway.storage.factory import StorageFactory


def uid_lookup(factory: StorageFactory) -> UidLookup:
    """The uid of a service account or secret (tokens are bound to them), or None: from the
    watch cache, or the store when the cache cannot answer yet or misses it."""
    listers = {"ServiceAccount": lister_for(factory, SERVICEACCOUNTS, read_your_writes=True),
               "Secret": lister_for(factory, SECRETS, read_your_writes=True)}

    async def uid_of(kind: str, namespace: str, name: str) -> str | None:
        lister = listers.get(kind)
        if lister is None:
            return None
        try:
            obj = await lister.read(namespace, name)
        except KeyNotFoundError:
            return None
        except StorageError as err:
            resource = lister.resource
            raise from_storage_error(err, resource.plural, name, resource.group) from None
        uid = obj["metadata"].get("uid")
        return uid if isinstance(uid, str) else None

    return uid_of


def new_security(options: ServeOptions, factory: StorageFactory) -> Security:
    """Authenticators and authorizer from the flags. The authorizer and the token
    authenticator read these caches: a write to them returns once the cache has it, so a new
    binding or a deleted account counts at once."""
    caches = [lister_for(factory, resource, read_your_writes=True).cacher
              for resource in (ROLES, CLUSTER_ROLES, ROLE_BINDINGS, CLUSTER_ROLE_BINDINGS)]
    rbac = RBAC(RBACCaches(*caches))
    return build_security(options, rbac, uid_lookup(factory))


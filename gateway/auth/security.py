"""The security configuration assembled from the flags: authenticators and authorizer."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.apimachinery.dynamicfile import FileContent
from gateway.auth.authn import Authenticator
from gateway.auth.authn.requestheader import RequestHeaderConfig, request_header_authenticator
from gateway.auth.authn.serviceaccount import ServiceAccountTokens, UidLookup
from gateway.auth.authn.tokens import (
    TokenAuthenticator,
    bearer_authenticator,
    load_token_file,
    token_file_authenticator,
)
from gateway.auth.authn.x509 import (
    CABundle,
    CertificateVerifier,
    ca_bundle_file,
    x509_authenticator,
)
from gateway.auth.authorizer import (
    Authorizer,
    always_allow,
    always_deny,
    privileged_groups,
    union,
)
from gateway.auth.rbac.authorizer import RBAC
from gateway.options import ServeOptions


@dataclass
class Security:
    authenticators: list[Authenticator]
    token_authenticators: list[TokenAuthenticator]
    anonymous: bool
    authorize: Authorizer
    rbac: RBAC | None
    tokens: ServiceAccountTokens
    front_proxy: RequestHeaderConfig | None
    modes: list[str] = field(default_factory=list)
    #: --client-ca-file and --requestheader-client-ca-file, read again when they change
    client_ca: FileContent[CABundle] | None = None
    requestheader_ca: FileContent[CABundle] | None = None

    @property
    def api_audiences(self) -> tuple[str, ...]:
        return self.tokens.audiences

    def files(self) -> list[FileContent]:
        """Every file the authenticators hold, for a FileWatcher."""
        return [c for c in (self.client_ca, self.requestheader_ca, *self.tokens.files)
                if c is not None]


def build_security(options: ServeOptions, rbac: RBAC, lookup: UidLookup) -> Security:
    """Authenticators in kube-apiserver's order: front proxy, client certificate, tokens.
    FileContentError or KeyFileError when a CA bundle or key file does not load."""
    authenticators: list[Authenticator] = []
    front_proxy = None
    requestheader_ca = client_ca = None
    if options.requestheader_client_ca_file is not None:
        requestheader_ca = ca_bundle_file("--requestheader-client-ca-file",
                                          options.requestheader_client_ca_file)
        front_proxy = RequestHeaderConfig(
            tuple(options.requestheader_username_headers),
            tuple(options.requestheader_group_headers),
            tuple(options.requestheader_extra_headers_prefix),
            tuple(options.requestheader_uid_headers),
            tuple(options.requestheader_allowed_names))
        authenticators.append(request_header_authenticator(
            CertificateVerifier(requestheader_ca), front_proxy))
    if options.client_ca_file is not None:
        client_ca = ca_bundle_file("--client-ca-file", options.client_ca_file)
        authenticators.append(x509_authenticator(CertificateVerifier(client_ca)))
    tokens = ServiceAccountTokens.from_files(
        options.service_account_signing_key_file, options.service_account_key_files,
        options.service_account_issuers, options.api_audiences, lookup)
    token_authenticators: list[TokenAuthenticator] = []
    if options.token_auth_file is not None:
        token_authenticators.append(token_file_authenticator(
            load_token_file(options.token_auth_file)))
    token_authenticators.append(tokens.authenticate)
    authenticators.append(bearer_authenticator(token_authenticators, tokens.audiences))
    modes = {"AlwaysAllow": always_allow, "AlwaysDeny": always_deny, "RBAC": rbac.authorize}
    authorize = union([privileged_groups, *(modes[m] for m in options.authorization_modes)])
    return Security(authenticators, token_authenticators, options.anonymous_auth, authorize,
                    rbac if "RBAC" in options.authorization_modes else None, tokens,
                    front_proxy, list(options.authorization_modes), client_ca, requestheader_ca)

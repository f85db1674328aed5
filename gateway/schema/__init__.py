"""OpenAPI schemas of every type the gateway serves, and what is derived from them.

One schema per type drives the OpenAPI documents (/openapi/v2, /openapi/v3), the list merge
keys of strategic merge patch, the list types of server-side apply, and which fields a body may
carry (unknown fields are dropped, or refused with fieldValidation=Strict), as kube-apiserver
derives all of these from its Go types.
"""

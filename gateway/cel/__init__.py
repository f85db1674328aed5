"""kube's CEL (k8s.io/apiserver pkg/cel) on cel-expr-python, the CEL project's binding of its
C++ implementation: one environment and one set of libraries for CRD validation rules,
ValidatingAdmissionPolicies and admission webhooks' matchConditions.

``library`` builds the environments, ``types`` the CEL types of schemas (and the values bound
to them), ``opaque`` kube's own types; ``quantity``, ``net``, ``urls``, ``formats`` and ``authz``
are kube's libraries of the same names.
"""

"""Structural schemas of custom resources at run time, as apiextensions-apiserver v1.32 applies
them: validation (validation.py), pruning (pruning.py), defaulting (defaulting.py), and the
CEL rules of x-kubernetes-validations (cel.py).

In the request path kube defaults first, then prunes (unknown fields, non-nullable nulls
without a default, embedded metadata), then validates; reads from storage are pruned and
defaulted again. All functions here work on plain JSON values and the schema as a plain dict
(the CRD's JSONSchemaProps); they do no I/O. compile_schema prepares one schema for the
request path: its methods answer as these functions do, at a fraction of the cost.
"""

from gateway.apiextensions.schema.compiled import CompiledSchema, compile_schema
from gateway.apiextensions.schema.defaulting import apply_defaults
from gateway.apiextensions.schema.pruning import prune, prune_non_nullable_nulls
from gateway.apiextensions.schema.validation import validate

__all__ = ["CompiledSchema", "apply_defaults", "compile_schema", "prune",
           "prune_non_nullable_nulls", "validate"]

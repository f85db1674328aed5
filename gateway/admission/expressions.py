"""CEL expressions of admission, as kube's admission/plugin/cel compiles and runs them: webhook
matchConditions and every expression of a ValidatingAdmissionPolicy.

Compiling (compile.go, composition.go): ``object`` and ``oldObject`` are dyn (or, for the
type checker, a kind's schema type), ``request`` is kube's AdmissionRequest type, and
``namespaceObject`` its Namespace type, declared when ``Options`` say so: ``params`` and
``authorizer`` / ``authorizer.requestResource``; a policy's variables, compiled in order, are
declared as ``variables.<name>`` with the type each was found to have. An expression must have
one of the return types asked for. Errors are kube's cel.Error details ("compilation failed:
ERROR: <input>:1:5: ...", "must evaluate to bool but got int").

Running (activation.go): ``object``, ``oldObject``, ``params``, ``request`` and
``namespaceObject`` are the objects as JSON maps; ``variables.<name>`` are evaluated when an
expression may read them, once per activation, and a variable that failed is missing, so that
reading it is the error (worded as kube's "composited variable ... fails to evaluate"); the
authorizer's checks are answered in rounds (gateway.cel.authz). An evaluation error is
``expression '<expr>' resulted in error: <cel-go's words>``.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from cel_expr_python import cel
from google.protobuf import duration_pb2, timestamp_pb2

from gateway.cel import authz
from gateway.cel import library as lib
from gateway.cel.types import Decl, TypeBuilder

T = cel.Type
Object = dict[str, Any]

OBJECT, OLD_OBJECT, PARAMS, REQUEST = "object", "oldObject", "params", "request"
NAMESPACE, AUTHORIZER = "namespaceObject", "authorizer"
REQUEST_RESOURCE, VARIABLES = "authorizer.requestResource", "variables"

#: Return types, in cel-go's spelling (None: anything).
BOOL: tuple[str, ...] = ("bool",)
STRING: tuple[str, ...] = ("string",)
STRING_OR_NULL: tuple[str, ...] = ("string", "null_type")

_UNDECLARED = re.compile(r"ERROR: <input>:(\d+):(\d+): undeclared reference to "
                         r"'([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)' "
                         r"\(in container ''\)\n \| ([^\n]*)\n \| [. ]*\^")
_VARIABLE_USE = re.compile(r"\bvariables\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_MISSING_VARIABLE = re.compile(r'No value with name "variables\.([A-Za-z_][A-Za-z0-9_]*)" '
                               r"found in Activation")


# -- kube's hand-made types: BuildRequestType, BuildNamespaceType -----------------------------


def _obj(message: str, /, **fields: Decl) -> Decl:
    return Decl("object", fields={k: (k, v) for k, v in fields.items()}, name=message)


def _types() -> TypeBuilder:
    string, strings = Decl("string"), Decl("list", Decl("string"))
    gvk = _obj("GroupVersionKind", group=string, version=string, kind=string)
    gvr = _obj("GroupVersionResource", group=string, version=string, resource=string)
    user = _obj("UserInfo", username=string, uid=string, groups=strings,
                extra=Decl("map", strings))
    request = _obj("AdmissionRequest", kind=gvk, resource=gvr, subResource=string,
                   requestKind=gvk, requestResource=gvr, requestSubResource=string, name=string,
                   namespace=string, operation=string, userInfo=user, dryRun=Decl("bool"),
                   options=Decl("dyn"))
    condition = _obj("NamespaceCondition", status=string, type=string,
                     lastTransitionTime=Decl("timestamp"), message=string, reason=string)
    labels = Decl("map", string)
    metadata = _obj("NamespaceMetadata", name=string, generateName=string, namespace=string,
                    labels=labels, annotations=labels, UID=string,
                    creationTimestamp=Decl("timestamp"),
                    deletionGracePeriodSeconds=Decl("int"),
                    deletionTimestamp=Decl("timestamp"), generation=Decl("int"),
                    resourceVersion=string, finalizers=strings)
    namespace = _obj("Namespace", metadata=metadata,
                     spec=_obj("NamespaceSpec", finalizers=strings),
                     status=_obj("NamespaceStatus", conditions=Decl("list", condition),
                                 phase=string))
    builder = TypeBuilder("kubernetes")
    builder.cel_type(request)
    builder.cel_type(namespace)
    return builder


KUBE_TYPES = _types()
REQUEST_TYPE = T("kubernetes.AdmissionRequest")
NAMESPACE_TYPE = T("kubernetes.Namespace")


def go_type(t: cel.Type) -> str:
    """A type as cel-go's Type.String() writes it (``list(int)``, ``map(string, dyn)``)."""
    return _go_type_name(t.name())


_SCALAR_NAMES = {"INT": "int", "UINT": "uint", "DOUBLE": "double", "STRING": "string",
                 "BYTES": "bytes", "BOOL": "bool", "NULL": "null_type", "DYN": "dyn",
                 "TIMESTAMP": "google.protobuf.Timestamp",
                 "DURATION": "google.protobuf.Duration", "ERROR": "*error*"}


def _go_type_name(name: str) -> str:
    head, bracket, rest = name.partition("<")
    if not bracket:
        return _SCALAR_NAMES.get(name, name)
    params, depth, current = [], 0, ""
    for char in rest[:-1]:
        if char == "," and depth == 0:
            params.append(current.strip())
            current = ""
            continue
        depth += (char == "<") - (char == ">")
        current += char
    params.append(current.strip())
    inner = ", ".join(_go_type_name(p) for p in params)
    outer = {"LIST": "list", "MAP": "map", "TYPE": "type"}.get(head, head)
    return f"{outer}({inner})"


# -- compiling ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    """OptionalVariableDeclarations: which of the optional variables are declared."""

    params: bool = False
    authorizer: bool = True


@dataclass
class Compiled:
    """One compiled expression (kube's CompilationResult)."""

    expression: str
    program: Any = None
    #: kube's cel.Error detail; the expression cannot run when set
    error: str = ""
    output: cel.Type | None = None
    #: the variables it may read (its text names them)
    variables: tuple[str, ...] = ()


class Compiler:
    """kube's CompositedCompiler: variables compiled in order are declared for every
    expression compiled after them."""

    def __init__(self, *, object_type: cel.Type = T.DYN, params_type: cel.Type = T.DYN,
                 types: Iterable[TypeBuilder] = (), composited: bool = False) -> None:
        self.object_type, self.params_type = object_type, params_type
        #: a policy's compiler: ``variables`` is declared (kube's CompositionEnv), even with
        #: no variable in it
        self.composited = composited
        self._pool = KUBE_TYPES.pool(*types)
        self.variables: dict[str, Compiled] = {}
        self._envs: dict[tuple[Options, int], cel.Env] = {}

    def env(self, options: Options) -> cel.Env:
        key = (options, len(self.variables))
        env = self._envs.get(key)
        if env is None:
            declared: dict[str, cel.Type] = {
                OBJECT: self.object_type, OLD_OBJECT: self.object_type,
                REQUEST: REQUEST_TYPE, NAMESPACE: NAMESPACE_TYPE}
            if options.params:
                declared[PARAMS] = self.params_type
            if options.authorizer:
                declared[AUTHORIZER] = authz.AUTHORIZER
                declared[REQUEST_RESOURCE] = authz.RESOURCE_CHECK
            for name, variable in self.variables.items():
                declared[f"{VARIABLES}.{name}"] = _declarable(variable.output)
            env = self._envs[key] = lib.new_env(declared, pool=self._pool)
        return env

    def compile(self, expression: str, options: Options,
                returns: tuple[str, ...] | None) -> Compiled:
        """CompileCELExpression: the expression checked, then its return type."""
        used = tuple(dict.fromkeys(_VARIABLE_USE.findall(expression)))
        try:
            checked = self.env(options).compile(expression)
        except (RuntimeError, ValueError) as err:
            error = _undeclared_as_cel_go(lib.compile_error(str(err)), self.composited)
            return Compiled(expression, error=f"compilation failed: {error}", variables=used)
        output = checked.return_type()
        got = go_type(output)
        if returns is not None and got not in returns:
            if len(returns) == 1:
                why = f"must evaluate to {returns[0]} but got {got}"
            else:
                why = f"must evaluate to one of [{' '.join(returns)}] but got {got}"
            return Compiled(expression, error=why, output=output, variables=used)
        return Compiled(expression, lib.runtime_program(runtime_env(), checked),
                        output=output, variables=used)

    def add_variable(self, name: str, expression: str, options: Options) -> Compiled:
        """CompileAndStoreVariable: declared for what follows, whatever its outcome."""
        compiled = self.compile(expression, options, None)
        self.variables[name] = compiled
        return compiled


def _declarable(output: cel.Type | None) -> cel.Type:
    """A variable's type as a declaration (cel-expr-python cannot declare an optional one:
    dyn)."""
    if output is None or output.name().startswith("optional_type"):
        return T.DYN
    return output


def _undeclared_as_cel_go(text: str, composited: bool) -> str:
    """cel-cpp names a whole dotted name it cannot resolve, at its last dot; cel-go the
    undeclared variable at its start, or, for a field of the declared ``variables`` object,
    that field ("undefined field 'x'", at the dot)."""

    def reword(match: re.Match[str]) -> str:
        line, column, name, source = match.groups()
        root, _, rest = name.partition(".")
        start = int(column) - len(name.rpartition(".")[0])
        if composited and root == VARIABLES:
            dot = start + len(root)
            return (f"ERROR: <input>:{line}:{dot}: undefined field '{rest.split('.')[0]}'\n"
                    f" | {source}\n | {'.' * (dot - 1)}^")
        return (f"ERROR: <input>:{line}:{start}: undeclared reference to '{root}' "
                f"(in container '')\n | {source}\n | {'.' * (start - 1)}^")

    return _UNDECLARED.sub(reword, text)


_RUNTIME: cel.Env | None = None


def runtime_env() -> cel.Env:
    """The environment every admission expression runs in (names resolved by the checker)."""
    global _RUNTIME
    if _RUNTIME is None:
        _RUNTIME = lib.new_env({}, runtime=True)
    return _RUNTIME


def compile_error(expression: str, options: Options, returns: tuple[str, ...] | None,
                  compiler: Compiler | None = None) -> str:
    """Why ``expression`` is refused when a configuration is written ("" when it is not)."""
    return (compiler or Compiler()).compile(expression, options, returns).error


# -- running -----------------------------------------------------------------------------------


@dataclass
class Evaluation:
    """An expression's outcome: its value, or kube's error (the expression's or the
    compilation's)."""

    value: Any = None
    error: str = ""


@dataclass
class Activation:
    """What the expressions of one evaluation see (kube's evaluationActivation), with the
    variables' values as they are asked for."""

    data: dict[str, Any]
    checks: authz.Checks | None = None
    variables: dict[str, Compiled] = field(default_factory=dict)
    _failed: dict[str, str] = field(default_factory=dict)
    _done: set[str] = field(default_factory=set)

    async def evaluate(self, compiled: Compiled) -> Evaluation:
        """Activation.Evaluate: the value, or kube's words for what went wrong."""
        if compiled.error:
            return Evaluation(error=f"compilation error: {compiled.error}")
        value, error = await self._value(compiled)
        if error:
            return Evaluation(error=f"expression '{compiled.expression}' resulted in error: "
                                    f"{error}")
        return Evaluation(value)

    async def _value(self, compiled: Compiled) -> tuple[Any, str]:
        """The value of a compiled expression, the variables it reads evaluated first; or the
        error in cel-go's words (reading a failed variable is that variable's failure)."""
        for name in compiled.variables:
            await self._variable(name)
        try:
            value = await self._run(compiled.program)
        except (RuntimeError, ValueError, TypeError) as err:  # data the runtime refuses
            return None, lib.runtime_error(str(err))
        if value.type().name() != "ERROR":
            try:
                return _plain(value), ""
            except _NotBindable:
                return None, "an optional value cannot be kept in a variable here"
        try:
            text = lib.runtime_error(str(value.value()))
        except TypeError:  # no error: a value Python cannot be given (an optional)
            return None, "an optional value cannot be kept in a variable here"
        missing = _MISSING_VARIABLE.search(text)
        if missing and missing.group(1) in self._failed:
            text = self._failed[missing.group(1)]
        return None, text

    async def _variable(self, name: str) -> None:
        """Evaluate a variable (and those it reads) once; a failure is remembered."""
        compiled = self.variables.get(name)
        if name in self._done or compiled is None:
            return
        self._done.add(name)
        if compiled.error:
            self._failed[name] = (f'composited variable "{name}" fails to compile: '
                                  f"{compiled.error}")
            return
        value, error = await self._value(compiled)
        if error:
            self._failed[name] = f'composited variable "{name}" fails to evaluate: {error}'
        else:
            self.data[f"{VARIABLES}.{name}"] = value

    async def _run(self, program: Any) -> Any:
        activation = runtime_env().Activation(self.data)
        return await authz.evaluate(lambda: program.eval(activation=activation), self.checks)


class _NotBindable(Exception):
    """A value the runtime cannot be given back (an optional)."""


def _plain(value: Any) -> Any:
    """A CEL value as the runtime can be given it again (a variable's value, read by later
    expressions): JSON-like values, kube's opaque values as their messages, timestamps and
    durations as protobuf's; _NotBindable for an optional."""
    try:
        if value.type().is_message():
            return value.value()
        return _bindable(value.plain_value())
    except (TypeError, RuntimeError, AssertionError):
        raise _NotBindable from None


def _bindable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _bindable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bindable(v) for v in value]
    if isinstance(value, datetime.datetime):
        stamp = timestamp_pb2.Timestamp()
        stamp.FromDatetime(value)
        return stamp
    if isinstance(value, datetime.timedelta):
        duration = duration_pb2.Duration()
        duration.FromTimedelta(value)
        return duration
    return value

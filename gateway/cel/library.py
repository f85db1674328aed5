"""The CEL environment of kube-apiserver 1.32 (apiserver pkg/cel/environment/base.go), for
CRD validation rules, admission policies and webhook match conditions alike.

kube's base environment is the CEL standard library with cross-type numeric comparisons,
optional types, the strings extension version 2, sets, and kube's own libraries
(pkg/cel/library: lists, regex, URLs, quantity, IP, CIDR, format, authorizer).
cel-expr-python ships the standard library, optionals and strings; this module adds what kube
adds on top, as Python functions (quantity.py, net.py, urls.py, formats.py, authz.py), and
rewords cel-cpp's errors as cel-go words them, since kube's messages quote cel-go's errors.

Each environment comes in two kinds. A checking one declares every typed overload kube
declares, with no functions: expressions are type-checked there. A runtime one holds the
functions, one per argument kind (cel-cpp dispatches Python functions by kind, and kube's
types are all messages here: ``string(ip)`` and ``string(cidr)`` are one function); a checked
expression is run by deserializing it there (``runtime_program``), so it keeps the checker's
resolution of names and overloads.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import re2
from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from gateway.cel import authz, formats, net, quantity, urls
from gateway.cel.types import default_pool

T = cel.Type
_COMPARISONS = ("_<_", "_<=_", "_>_", "_>=_")
_ORDERED = {"int": T.INT, "uint": T.UINT, "double": T.DOUBLE, "string": T.STRING,
            "bytes": T.BYTES, "bool": T.BOOL, "timestamp": T.TIMESTAMP,
            "duration": T.DURATION}
_NUMBERS = ("int", "uint", "double")
#: kube's comparisons accept int, uint and double mixed (cel.CrossTypeNumericComparisons);
#: cel-cpp's checker does not, so the standard ones are replaced by a declaration that does.
_CONFIG_YAML = "stdlib:\n  exclude_functions:\n" + "".join(
    f'    - name: "{name}"\n' for name in _COMPARISONS)


def _comparison_decls() -> list[cel.FunctionDecl]:
    pairs = [(a, a) for a in _ORDERED] + [(a, b) for a in _NUMBERS for b in _NUMBERS if a != b]
    return [cel.FunctionDecl(op, [
        cel.Overload(f"{op.strip('_')}_{a}_{b}", T.BOOL, [_ORDERED[a], _ORDERED[b]])
        for a, b in pairs]) for op in _COMPARISONS]


# -- kube's lists, regex and sets libraries ------------------------------------------------


def _is_sorted(items: list) -> bool:
    return all(items[i] <= items[i + 1] for i in range(len(items) - 1))


def _sum(items: list) -> Any:
    total = items[0] * 0 if items else 0
    for item in items:
        total += item
    return total


def _pick(chooser: Callable[[list], Any], name: str) -> Callable[[list], Any]:
    def pick(items: list) -> Any:
        if not items:
            raise ValueError(f"{name} called on empty list")
        return chooser(items)
    return pick


@lru_cache(maxsize=256)
def _regexp(pattern: str) -> Any:
    """The pattern as Go's regexp reads it (RE2); ValueError when it does not compile."""
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as err:
        reason = err.args[0] if err.args else ""
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ValueError(f"error parsing regexp: {reason}") from None


def _find(text: str, pattern: str) -> str:
    match = _regexp(pattern).search(text)
    return match.group() if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    found = [m.group() for m in _regexp(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


def _member(name: str, result: cel.Type, params: list[cel.Type], impl: Callable | None,
            suffix: str = "") -> cel.Overload:
    return cel.Overload(f"{name}_{suffix or len(params)}", result, params, is_member=True,
                        impl=impl)


def _list_decls(runtime: bool) -> list[cel.FunctionDecl]:
    """isSorted, sum, min, max: typed overloads to check, one dyn overload to run.

    cel-cpp dispatches Python functions by argument kind, so a runtime environment can hold one
    list overload per name; the checker's environment gets the typed ones kube declares.
    """
    dyn_list = T.List(T.DYN)
    impls = {"sum": _sum, "min": _pick(min, "min"), "max": _pick(max, "max")}
    decls = [cel.FunctionDecl("isSorted", [_member("isSorted", T.BOOL, [dyn_list], _is_sorted)])]
    for name, impl in impls.items():
        if runtime:
            overloads = [_member(name, T.DYN, [dyn_list], impl)]
        else:
            kinds = ("int", "uint", "double", "duration") if name == "sum" else tuple(_ORDERED)
            overloads = [_member(name, _ORDERED[k], [T.List(_ORDERED[k])], None, f"list_{k}")
                         for k in kinds]
        decls.append(cel.FunctionDecl(name, overloads))
    return decls


def _regex_decls() -> list[cel.FunctionDecl]:
    return [
        cel.FunctionDecl("find", [_member("find", T.STRING, [T.STRING, T.STRING], _find)]),
        cel.FunctionDecl("findAll", [
            _member("findAll", T.List(T.STRING), [T.STRING, T.STRING], _find_all),
            _member("findAll", T.List(T.STRING), [T.STRING, T.STRING, T.INT], _find_all)]),
    ]


def _sets_decls() -> list[cel.FunctionDecl]:
    impls = {
        "sets.contains": lambda a, b: all(x in a for x in b),
        "sets.equivalent": lambda a, b: all(x in a for x in b) and all(x in b for x in a),
        "sets.intersects": lambda a, b: any(x in a for x in b),
    }
    return [cel.FunctionDecl(name, [cel.Overload(
        name.replace(".", "_"), T.BOOL, [T.List(T.DYN), T.List(T.DYN)], impl=impl)])
        for name, impl in impls.items()]


def functions(runtime: bool) -> list[cel.FunctionDecl]:
    """Every function kube declares beyond what the extensions bring."""
    return (_comparison_decls() + _list_decls(runtime) + _regex_decls() + _sets_decls()
            + quantity.declarations(runtime) + net.declarations(runtime)
            + urls.declarations(runtime) + formats.declarations(runtime)
            + authz.declarations(runtime))


def _merged(runtime: bool) -> cel.CelExtension:
    """Overloads of functions the standard library or an extension already declares
    (``string`` of kube's types; the optional methods of format's stand-ins)."""
    merged = {"string": net.string_overloads(runtime), **formats.merged_overloads(runtime)}
    return cel.CelExtension("kubernetes", [cel.FunctionDecl(name, overloads)
                                           for name, overloads in merged.items()])


def new_env(variables: dict[str, cel.Type], *, pool: Any = None, runtime: bool = False,
            bindings: bool = False) -> cel.Env:
    """A CEL environment as kube's StoredExpressionsEnv, with these variables; ``pool``
    declares message types of its own (it must hold types.default_pool's files)."""
    extensions = [ext_optional.ExtOptional(), ext_strings.ExtStrings(version=2),
                  _merged(runtime)]
    if bindings:  # only for the optionalOldSelf wrapper: kube 1.32 has no cel.bind
        extensions.append(ext_bindings.ExtBindings())
    config = cel.NewEnvConfigFromYaml(_CONFIG_YAML)
    return cel.NewEnv(pool if pool is not None else default_pool(), config=config,
                      variables=variables, functions=functions(runtime), extensions=extensions)


def runtime_program(env: cel.Env, checked: Any) -> Any:
    """A checked expression, ready to run in the runtime environment ``env``."""
    return env.deserialize(checked.serialize())


# -- cel-cpp's words as cel-go's -----------------------------------------------------------

_STATUS = re.compile(r"^[A-Z_]+: ")
_STATUS_TAIL = re.compile(r" \[[A-Z_]+\]$")
_RUNTIME_WORDS: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (re.compile(r'Key not found in map : "?(.*?)"?$'), lambda m: f"no such key: {m[1]}"),
    (re.compile(r"Index error: index=(-?\d+) size=\d+$"),
     lambda m: f"index out of bounds: {m[1]}"),
    (re.compile(r"divide by zero$"), lambda m: "division by zero"),
    (re.compile(r"No matching overloads found.*", re.S), lambda m: "no such overload"),
    (re.compile(r"Iteration budget exceeded$"),
     lambda m: "operation cancelled: actual cost limit exceeded"),
]


def strip_status(text: str) -> str:
    """An absl status as text, without its code before and after."""
    return _STATUS_TAIL.sub("", _STATUS.sub("", text.strip()))


def runtime_error(text: str) -> str:
    """A cel-cpp evaluation error as cel-go says it (types/err.go, interpreter/attributes.go)."""
    text = strip_status(text)
    for pattern, words in _RUNTIME_WORDS:
        match = pattern.match(text)
        if match:
            return words(match)
    return text


def compile_error(text: str, line_shift: int = 0) -> str:
    """cel-cpp's issues as cel-go's Issues.String(): checker wording, lines of the rule."""
    text = strip_status(text)
    text = re.sub(r"(undefined field '[^']*') not found in struct '[^']*'", r"\1", text)
    issues = re.split(r"\n(?=ERROR: )", text)
    if len(issues) > 1:  # cel-go reports no issue about an operand that is already wrong
        text = "\n".join(i for i in issues if "'*error*'" not in i) or text
    if line_shift:
        text = re.sub(r"<input>:(\d+):",
                      lambda m: f"<input>:{int(m[1]) - line_shift}:", text)
    return text

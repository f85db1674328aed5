"""kube's CEL libraries on cel-expr-python (gateway/cel) and the admission expressions built on
them (gateway/admission/expressions.py): results and error words as kube's own library tests
(apiserver pkg/cel/library/*_test.go) expect them, type checking as cel-go words it, and the
evaluation rules of admission (variables, the authorizer, kube's error texts)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.admission.conditions import ConditionError, evaluate
from gateway.admission.expressions import (
    BOOL,
    STRING,
    STRING_OR_NULL,
    Activation,
    Compiler,
    Options,
)
from gateway.cel import authz
from gateway.cel.quantity import QuantityError, parse

POLICY = Options(params=True, authorizer=True)


async def run(expression: str, *, checks: authz.Checks | None = None,
              **data: Any) -> Any:
    """The value of an expression (its kube error text as ``ERROR: ...``)."""
    compiled = Compiler(composited=True).compile(expression, POLICY, None)
    assert not compiled.error, compiled.error
    outcome = await Activation({"object": None, **data}, checks).evaluate(compiled)
    return f"ERROR: {outcome.error}" if outcome.error else outcome.value


def failed(expression: str, reason: str) -> str:
    return f"ERROR: expression '{expression}' resulted in error: {reason}"


# -- quantity ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("expression", "value"), [
    ('quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")', True),
    ('quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M")', True),
    ('quantity("200M") == quantity("0.3G")', False),
    ('quantity("50M").isLessThan(quantity("50Mi"))', True),
    ('quantity("100M").isLessThan(quantity("50M"))', False),
    ('quantity("50Mi").isGreaterThan(quantity("50M"))', True),
    ('quantity("200M").compareTo(quantity("0.2G"))', 0),
    ('quantity("50M").compareTo(quantity("50Mi"))', -1),
    ('quantity("50k").add(quantity("20")) == quantity("50.02k")', True),
    ('quantity("50k").add(20).isLessThan(quantity("50020"))', False),
    ('quantity("50k").sub(quantity("20")) == quantity("49.98k")', True),
    ('quantity("50k").sub(20) == quantity("49980")', True),
    ('quantity("50k").add(20).sub(quantity("100k")).asInteger()', -49980),
    ('quantity("50k").asInteger()', 50000),
    ('quantity("9999999999999999999999999999999999999G").isInteger()', False),
    ('quantity("50").isInteger()', True),
    ('quantity("50.703k").asApproximateFloat()', 50703.0),
    ('isQuantity("20Mi") && isQuantity("20M") && !isQuantity("20Mo")', True),
    ('sign(quantity("-1m")) == -1 && sign(quantity("0")) == 0', True),
    ('quantity("12Mi").asInteger()', 12 * 2**20),
])
async def test_quantity(expression: str, value: Any) -> None:
    assert await run(expression) == value


async def test_quantity_errors() -> None:
    assert await run('quantity("10Mo")') == failed(
        'quantity("10Mo")', "quantities must match the regular expression "
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    assert await run('quantity("10Mm")') == failed(
        'quantity("10Mm")', "unable to parse quantity's suffix")
    expression = 'quantity("9999999999999999999999999999999999999G").asInteger()'
    assert await run(expression) == failed(expression, "cannot convert value to integer")


def test_quantity_parsing_follows_parse_quantity() -> None:
    assert parse("1.5Gi") == 1.5 * 2**30
    assert parse("1e3") == 1000 and parse("1E3") == 1000 and parse("1E") == 10**18
    assert parse("100m") * 10 == 1
    assert parse("1n") * 10**9 == 1 and parse("0.1n") * 10**9 == 1  # rounded up to a nano
    assert parse("-0.1n") * 10**9 == -1
    assert parse("16Ei") == 2**63 - 1  # binary suffixes are capped
    assert parse("-") == 0 and parse(".5") == 0.5
    for bad in ("", "1.2.3", "Mi", "1Mix", "1 M"):
        with pytest.raises(QuantityError):
            parse(bad)


# -- IP and CIDR ------------------------------------------------------------------------------


@pytest.mark.parametrize(("expression", "value"), [
    ('isIP("192.168.0.1") && !isIP("192.168.0.1.0")', True),
    ('ip.isCanonical("127.0.0.1")', True),
    ('ip("192.168.0.1").family()', 4),
    ('ip("0.0.0.0").isUnspecified() && !ip("127.0.0.1").isUnspecified()', True),
    ('ip("127.0.0.1").isLoopback() && !ip("1.2.3.4").isLoopback()', True),
    ('ip("224.0.0.1").isLinkLocalMulticast() && !ip("224.0.1.1").isLinkLocalMulticast()', True),
    ('ip("169.254.169.254").isLinkLocalUnicast() && !ip("192.168.0.1").isLinkLocalUnicast()',
     True),
    ('ip("192.168.0.1").isGlobalUnicast() && !ip("255.255.255.255").isGlobalUnicast()', True),
    ('isIP("2001:db8::68") && !isIP("2001:db8:::68")', True),
    ('ip.isCanonical("2001:db8::68") && !ip.isCanonical("2001:DB8::68")', True),
    ('ip("2001:db8::68").family()', 6),
    ('ip("::").isUnspecified() && ip("::1").isLoopback()', True),
    ('ip("ff02::1").isLinkLocalMulticast() && !ip("fd00::1").isLinkLocalMulticast()', True),
    ('ip("fe80::1").isLinkLocalUnicast() && !ip("fd80::1").isLinkLocalUnicast()', True),
    ('ip("2001:db8::abcd").isGlobalUnicast() && !ip("ff00::1").isGlobalUnicast()', True),
    ('string(ip("192.168.0.1"))', "192.168.0.1"),
    ('type(ip("192.168.0.1")) == net.IP', True),
    ('cidr("192.168.0.0/24").containsIP(ip("192.168.0.1"))', True),
    ('cidr("192.168.0.0/24").containsIP("192.168.1.1")', False),
    ('cidr("192.168.0.0/24").containsCIDR(cidr("192.168.0.1/32"))', True),
    ('cidr("192.168.0.0/24").containsCIDR("192.168.0.0/23")', False),
    ('cidr("192.168.0.0/24").containsCIDR(cidr("192.169.0.1/32"))', False),
    ('cidr("192.168.0.1/24").ip() == ip("192.168.0.1")', True),
    ('string(cidr("192.168.0.1/24").masked())', "192.168.0.0/24"),
    ('cidr("192.168.0.0/24").prefixLength()', 24),
    ('string(cidr("2001:db8::/32"))', "2001:db8::/32"),
    ('isCIDR("10.0.0.0/8") && !isCIDR("10.0.0.0")', True),
    ('cidr("10.0.0.0/8") == cidr("10.0.0.0/8") && ip("::1") != ip("::2")', True),
])
async def test_ip_and_cidr(expression: str, value: Any) -> None:
    assert await run(expression) == value


@pytest.mark.parametrize(("expression", "reason"), [
    ('ip("192.168.0.1.0")', 'IP Address "192.168.0.1.0" parse error during conversion from '
                            'string: ParseAddr("192.168.0.1.0"): IPv4 address too long'),
    ('ip("2001:db8:::68")', 'IP Address "2001:db8:::68" parse error during conversion from '
                            'string: ParseAddr("2001:db8:::68"): each colon-separated field '
                            'must have at least one digit (at ":68")'),
    ('ip("01.2.3.4")', 'IP Address "01.2.3.4" parse error during conversion from string: '
                       'ParseAddr("01.2.3.4"): IPv4 field has octet with leading zero'),
    ('ip("fe80::1%eth0")', 'IP address "fe80::1%eth0" with zone value is not allowed'),
    ('ip("::ffff:1.2.3.4")', 'IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed'),
    ('cidr("192.168.0.0/")', 'network address parse error during conversion from string: '
                             'network address parse error during conversion from string: '
                             'netip.ParsePrefix("192.168.0.0/"): bad bits after slash: ""'),
    ('cidr("10.0.0.0/33")', 'network address parse error during conversion from string: '
                            'network address parse error during conversion from string: '
                            'netip.ParsePrefix("10.0.0.0/33"): prefix length out of range'),
])
async def test_ip_and_cidr_errors(expression: str, reason: str) -> None:
    assert await run(expression) == failed(expression, reason)


def test_ip_of_a_cidr_does_not_type_check() -> None:
    error = Compiler().compile('isIP(cidr("192.168.0.0/24"))', POLICY, None).error
    assert "found no matching overload for 'isIP' applied to '(net.CIDR)'" in error


# -- URL --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("expression", "value"), [
    ("url('https://example.com:80/').getScheme()", "https"),
    ("url('https://example.com:80/').getHost()", "example.com:80"),
    ("url('https://example.com:80/').getHostname()", "example.com"),
    ("url('https://example.com:80/').getPort()", "80"),
    ("url('https://example.com/').getPort()", ""),
    ("url('https://[::1]:80/').getHostname()", "::1"),
    ("url('https://example.com/path%20with%20spaces/').getEscapedPath()",
     "/path%20with%20spaces/"),
    ("url('https://example.com/?k=a&k=b&k2=c').getQuery()", {"k": ["a", "b"], "k2": ["c"]}),
    ("isURL('https://example.com/') && isURL('/absolute/path') && !isURL('relative')", True),
])
async def test_url(expression: str, value: Any) -> None:
    assert await run(expression) == value


async def test_url_errors() -> None:
    expression = "url('relative')"
    assert await run(expression) == failed(
        expression, 'URL parse error during conversion from string: parse "relative": '
                    "invalid URI for request")
    expression = "url('https://h:x/')"
    assert await run(expression) == failed(
        expression, 'URL parse error during conversion from string: parse "https://h:x/": '
                    'invalid port ":x" after host')


# -- format -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("expression", "value"), [
    ("format.dns1123Label().validate('my-name').hasValue()", False),
    ("format.dns1123Label().validate('My_Name').value()", [
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
        "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
        "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]),
    ("format.dns1123LabelPrefix().validate('my-').hasValue()", False),
    ("format.named('dns1123Subdomain').value().validate('a.b').hasValue()", False),
    ("format.named('nope').hasValue()", False),
    ("format.uuid().validate('not-a-uuid').value()", ["does not match the UUID format"]),
    ("format.byte().validate('aGVsbG8=').hasValue()", False),
    ("format.date().validate('2024-02-30').value()", ["invalid date"]),
    ("format.datetime().validate('2024-01-01T00:00:00Z').hasValue()", False),
    ("format.labelValue().validate('a b').hasValue()", True),
    ("format.qualifiedName().validate('example.com/name').hasValue()", False),
])
async def test_format(expression: str, value: Any) -> None:
    assert await run(expression) == value


# -- authorizer -------------------------------------------------------------------------------


async def test_authorizer_checks_are_asked_once_and_answered() -> None:
    asked: list[authz.CheckRequest] = []

    async def authorize(check: authz.CheckRequest) -> authz.Answer:
        asked.append(check)
        allowed = check.resource == "secrets" and check.verb == "get"
        return authz.Answer(allowed, "because" if allowed else "")

    checks = authz.Checks(authorize)
    user = {"username": "alice", "groups": ["devs"]}
    data = {"authorizer": authz.authorizer_value(user),
            "authorizer.requestResource": authz.request_resource_value(
                user, "apps", "deployments", "scale", "ns", "web")}
    expression = ("authorizer.group('').resource('secrets').namespace('ns').name('s')"
                  ".check('get').allowed() && authorizer.group('').resource('secrets')"
                  ".namespace('ns').name('s').check('get').reason() == 'because'")
    assert await run(expression, checks=checks, **data) is True
    assert [(c.user, c.verb, c.group, c.version, c.resource, c.namespace, c.name)
            for c in asked] == [(user, "get", "", "*", "secrets", "ns", "s")]
    assert await run("authorizer.requestResource.check('update').allowed()",
                     checks=checks, **data) is False
    assert (asked[-1].resource, asked[-1].subresource, asked[-1].name) == (
        "deployments", "scale", "web")
    assert await run("authorizer.path('/healthz').check('get').errored()", checks=checks,
                     **data) is False
    assert (asked[-1].resource_request, asked[-1].path) == (False, "/healthz")
    assert await run("authorizer.serviceAccount('ns', 'robot').group('').resource('pods')"
                     ".check('list').allowed()", checks=checks, **data) is False
    assert asked[-1].user == {"username": "system:serviceaccount:ns:robot",
                              "groups": ["system:serviceaccounts",
                                         "system:serviceaccounts:ns"]}
    expression = "authorizer.group('').resource('').check('get').allowed()"
    assert await run(expression, checks=checks, **data) == failed(
        expression, "resource must not be empty")


# -- admission expressions: compiling ---------------------------------------------------------


@pytest.mark.parametrize(("expression", "options", "returns", "error"), [
    ("1", POLICY, BOOL, "must evaluate to bool but got int"),
    ("object.spec.paused", POLICY, BOOL, "must evaluate to bool but got dyn"),
    ("'a'", POLICY, STRING_OR_NULL, ""),
    ("null", POLICY, STRING_OR_NULL, ""),
    ("true ? 'a' : null", POLICY, STRING_OR_NULL,
     "compilation failed: ERROR: <input>:1:6: found no matching overload for '_?_:_' applied "
     "to '(bool, string, null_type)'\n | true ? 'a' : null\n | .....^"),
    ("[1]", POLICY, STRING, "must evaluate to string but got list(int)"),
    ("request.operatio == 'CREATE'", POLICY, BOOL,
     "compilation failed: ERROR: <input>:1:8: undefined field 'operatio'\n"
     " | request.operatio == 'CREATE'\n | .......^"),
    ("params.x == 1", Options(params=False), BOOL,
     "compilation failed: ERROR: <input>:1:1: undeclared reference to 'params' (in container "
     "'')\n | params.x == 1\n | ^"),
    ("authorizer.path('/').check('get').allowed()", Options(authorizer=False), BOOL,
     "compilation failed: ERROR: <input>:1:1: undeclared reference to 'authorizer' (in "
     "container '')\n | authorizer.path('/').check('get').allowed()\n | ^"),
    ("variables.nope == 1", POLICY, BOOL,
     "compilation failed: ERROR: <input>:1:10: undefined field 'nope'\n"
     " | variables.nope == 1\n | .........^"),
    ("namespaceObject.metadata.UID == ''", POLICY, BOOL, ""),
    ("namespaceObject.metadata.uid == ''", POLICY, BOOL,
     "compilation failed: ERROR: <input>:1:25: undefined field 'uid'\n"
     " | namespaceObject.metadata.uid == ''\n | ........................^"),
])
def test_compile_errors(expression: str, options: Options, returns: tuple[str, ...],
                        error: str) -> None:
    assert Compiler(composited=True).compile(expression, options, returns).error == error


def test_variables_are_declared_with_their_types_in_order() -> None:
    compiler = Compiler(composited=True)
    assert not compiler.add_variable("count", "size(object.data)", POLICY).error
    assert not compiler.add_variable("twice", "variables.count * 2", POLICY).error
    error = compiler.compile("variables.twice == 'x'", POLICY, BOOL).error
    assert "found no matching overload for '_==_' applied to '(int, string)'" in error
    assert compiler.add_variable("early", "variables.later", POLICY).error.startswith(
        "compilation failed: ERROR: <input>:1:10: undefined field 'later'")


# -- admission expressions: running ------------------------------------------------------------


async def test_variables_are_evaluated_when_read_and_errors_name_them() -> None:
    compiler = Compiler(composited=True)
    compiler.add_variable("missing", "object.nope", POLICY)
    compiler.add_variable("fine", "object.n + 1", POLICY)
    compiler.add_variable("broken", "variables.missing + 1", POLICY)

    def activation() -> Activation:
        return Activation({"object": {"n": 1}}, None, compiler.variables)

    ok = compiler.compile("variables.fine == 2", POLICY, BOOL)
    assert (await activation().evaluate(ok)).value is True
    # an errored variable fails only what reads it, in kube's words
    reads = compiler.compile("variables.missing == 1", POLICY, BOOL)
    assert (await activation().evaluate(reads)).error == (
        "expression 'variables.missing == 1' resulted in error: composited variable "
        "\"missing\" fails to evaluate: no such key: nope")
    chained = compiler.compile("variables.broken == 1", POLICY, BOOL)
    assert (await activation().evaluate(chained)).error == (
        "expression 'variables.broken == 1' resulted in error: composited variable "
        "\"broken\" fails to evaluate: composited variable \"missing\" fails to evaluate: no "
        "such key: nope")
    absorbed = compiler.compile("variables.fine == 2 || variables.missing == 1", POLICY, BOOL)
    assert (await activation().evaluate(absorbed)).value is True


async def test_a_compilation_error_is_reported_when_run() -> None:
    compiled = Compiler().compile("object.(", POLICY, BOOL)
    outcome = await Activation({"object": {}}).evaluate(compiled)
    assert outcome.error.startswith("compilation error: compilation failed: ERROR: <input>:1:8")


async def test_match_conditions_false_wins_over_errors() -> None:
    compiler = Compiler()
    conditions = [(name, compiler.compile(e, POLICY, BOOL)) for name, e in (
        ("errs", "object.nope == 1"), ("false", "false"), ("true", "true"))]
    match = await evaluate(conditions, Activation({"object": {}}))
    assert (match.matches, match.failed) == (False, "false")
    with pytest.raises(ConditionError) as raised:
        await evaluate([conditions[0], conditions[2]], Activation({"object": {}}))
    assert str(raised.value) == ("expression 'object.nope == 1' resulted in error: "
                                 "no such key: nope")


# -- regex ------------------------------------------------------------------------------------


async def test_find_and_find_all_are_re2() -> None:
    assert await run("'abc123'.find('[0-9]+')") == "123"
    assert await run("'a1b22c333'.findAll('[0-9]+', 2)") == ["1", "22"]
    assert await run("'héllo wörld'.findAll('\\\\pL+')") == ["héllo", "wörld"]
    expression = "'x'.find('(?=x)')"
    assert await run(expression) == failed(
        expression, "error parsing regexp: invalid perl operator: (?=")


async def test_variables_keep_timestamps_durations_and_kube_types() -> None:
    compiler = Compiler(composited=True)
    compiler.add_variable("when", "timestamp('2024-01-01T00:00:00Z')", POLICY)
    compiler.add_variable("wait", "[duration('1h')]", POLICY)
    compiler.add_variable("limit", "quantity('1Gi')", POLICY)
    compiler.add_variable("maybe", "optional.of(1)", POLICY)
    expression = ("variables.when < timestamp('2025-01-01T00:00:00Z') && variables.wait[0] > "
                  "duration('1m') && variables.limit.isGreaterThan(quantity('1G'))")
    compiled = compiler.compile(expression, POLICY, BOOL)
    assert (await Activation({}, None, compiler.variables).evaluate(compiled)).value is True
    # an optional cannot be handed back to the runtime: reading it is the variable's error
    compiled = compiler.compile("variables.maybe.hasValue()", POLICY, BOOL)
    assert (await Activation({}, None, compiler.variables).evaluate(compiled)).error == (
        "expression 'variables.maybe.hasValue()' resulted in error: composited variable "
        "\"maybe\" fails to evaluate: an optional value cannot be kept in a variable here")

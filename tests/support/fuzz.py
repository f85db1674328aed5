"""Requests generated from the gateway's own OpenAPI documents, sent by schemathesis, judged
as kube-apiserver's answers are (issue 19, item 4).

``run`` starts schemathesis' command line (``st run``) on a document the running gateway
serves: ``/openapi/v2`` whole, or every ``/openapi/v3`` group version merged into one (their
paths and component names do not overlap). This module is also schemathesis' hooks module
(``SCHEMATHESIS_HOOKS``), which gives it:

- ``kube_answers``, the check every response must pass: an error (4xx, 5xx) is a
  ``metav1.Status`` whose code is the response's, apart from the few answers kube itself
  writes in plain text; and a 5xx is one kube answers itself (a webhook or a backend the
  fuzzer configured that cannot be called, a request past its deadline), never a failure of
  the gateway's own (a panic's InternalError among them);
- watches (``?watch``, the ``/watch/`` paths) are long-running in kube as here: each is given
  ``timeoutSeconds=1``, so that every request ends, and one that does not end within the
  client's timeout is a failure (a hang).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import count
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis.internal import lambda_sources

#: Plain-text error answers kube writes itself (not a Status): the aggregator's for a remote
#: APIService it cannot reach, API Priority and Fairness' 429, impersonation's 500.
PLAIN_TEXT_ERRORS = (
    (503, re.compile(r"^service unavailable\n$")),
    (503, re.compile(r"^error trying to reach service: ")),
    (429, re.compile(r"^Too many requests, please try again later\.\n$")),
    (500, re.compile(r"^Internal Server Error: ")),
)
#: 5xx Statuses kube answers itself: a webhook that cannot be called, a conversion webhook,
#: a request past its deadline or a resourceVersion the cache has not reached (504), storage
#: that is not there, and the watch cache's own error for a resourceVersion that is not a
#: number (kube's cacher passes strconv's error on: a 500 without a reason), and a strategic
#: merge patch's unknown $patch directive (mergepatch's ErrBadPatchType, passed on).
KUBES_OWN_5XX = re.compile(
    r"failed calling webhook|conversion webhook for|Timeout: request did not complete|"
    r"Internal error occurred: Unknown patch type: |"
    r"the server was unable to return a response in the time allotted|"
    r"Too large resource version|ServiceUnavailable|storage is \(re\)initializing|"
    r"^resourceVersion: Invalid value: .*: strconv\.ParseUint: ")
#: Where generated requests go most of the time: the namespace, and objects of that name
#: created before the run (``SEEDED``) in it and at cluster scope.
SEEDED_NAMESPACE = "default"
SEEDED_NAME = "fuzz"
#: ``SEEDED``'s objects, one of each kind that has a by-name path (kubectl apply's input).
SEEDED = """
apiVersion: v1
kind: Namespace
metadata: {name: fuzz}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: fuzz, namespace: default, labels: {fuzz: "yes"}}
data: {a: b}
---
apiVersion: v1
kind: Secret
metadata: {name: fuzz, namespace: default}
stringData: {a: b}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: fuzz, namespace: default}
---
apiVersion: v1
kind: Service
metadata: {name: fuzz, namespace: default}
spec: {ports: [{port: 80}]}
---
apiVersion: v1
kind: Endpoints
metadata: {name: fuzz, namespace: default}
subsets: [{addresses: [{ip: 10.0.0.1}], ports: [{port: 80}]}]
---
apiVersion: v1
kind: Event
metadata: {name: fuzz, namespace: default}
involvedObject: {kind: ConfigMap, name: fuzz, namespace: default}
reason: Fuzzed
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: fuzz, namespace: default}
spec: {holderIdentity: fuzz}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: fuzz, namespace: default}
addressType: IPv4
endpoints: [{addresses: [10.0.0.1]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: fuzz, namespace: default}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: fuzz, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: fuzz}
subjects: [{kind: User, name: fuzz}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: fuzz}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: fuzz}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: fuzz}
subjects: [{kind: User, name: fuzz}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: fuzz}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: fuzz}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: fuzz}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE],
                                      resources: [configmaps]}]}
  validations: [{expression: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: fuzz}
spec: {policyName: fuzz, validationActions: [Audit],
       matchResources: {namespaceSelector: {matchLabels: {fuzz: "yes"}}}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata: {name: fuzz}
spec: {type: Limited, limited: {nominalConcurrencyShares: 1,
       limitResponse: {type: Reject}}}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata: {name: fuzz}
spec:
  priorityLevelConfiguration: {name: fuzz}
  matchingPrecedence: 9000
  rules: [{subjects: [{kind: User, user: {name: fuzz}}],
           resourceRules: [{apiGroups: ["*"], resources: ["*"], verbs: ["*"],
                            clusterScope: true, namespaces: ["*"]}]}]
"""
#: A panic's Status: the gateway failed, not the request.
PANIC = "an error on the server has prevented the request from succeeding"


# -- schemathesis' hooks -----------------------------------------------------------------------


#: CPython 3.11 before 3.11.8 counts the AST constructor's recursion in one place for all
#: threads (gh-106905): hypothesis, parsing Python source in several of schemathesis' worker
#: threads at once (to describe a lambda, to print an argument, to read a filter's bounds),
#: failed a test case now and then with "AST constructor recursion depth mismatch". Parsing,
#: and lambda descriptions (which compile a parsed lambda), go one thread at a time.
_AST_LOCK = threading.RLock()


def _one_thread_at_a_time(work: Any) -> Any:
    def serialized(*args: Any, **kwargs: Any) -> Any:
        with _AST_LOCK:
            return work(*args, **kwargs)

    return serialized


if os.environ.get("SCHEMATHESIS_HOOKS") == __name__:  # in schemathesis' process only
    ast.parse = _one_thread_at_a_time(ast.parse)
    if hasattr(lambda_sources, "_lambda_description"):  # a private name: may go
        lambda_sources._lambda_description = _one_thread_at_a_time(
            lambda_sources._lambda_description)
_lock = threading.Lock()
_cases_of: dict[tuple[str, str], Iterator[int]] = {}


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    """Most cases in the namespace and on the objects that exist (``SEEDED``), so that they
    reach decoding, admission, patching and storage instead of a 404; watches end after a
    second (kube's watches end at timeoutSeconds too)."""
    parameters = case.path_parameters if isinstance(case.path_parameters, dict) else None
    if parameters:
        # the operation's n-th case, n counted per operation (each runs in one worker): two in
        # three in the namespace, every other one on the seeded name
        with _lock:
            nth = _cases_of.setdefault((case.method, case.operation.path), count())
            n = next(nth)
        if "namespace" in parameters and n % 3 != 2:
            parameters["namespace"] = SEEDED_NAMESPACE
        if "name" in parameters and n % 2 == 0:
            parameters["name"] = SEEDED_NAME
    query = case.query if isinstance(case.query, dict) else {}
    if "/watch/" in case.formatted_path or "watch" in query:  # any value: kube's ParseBool
        case.query = {**query, "timeoutSeconds": 1}
    return case


@schemathesis.check
def kube_answers(ctx: Any, response: Any, case: Any) -> bool | None:
    """Errors are Statuses (or kube's own plain text); 5xx only where kube answers one."""
    code = response.status_code
    _count(code, case, response.content or b"")
    if code < 400 or case.method.upper() == "HEAD":
        return None
    body = response.content or b""
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if isinstance(document, dict) and document.get("kind") == "Status":
        if document.get("code") != code or document.get("status") != "Failure":
            raise AssertionError(f"a Status whose code is not the response's {code}: {body!r}")
        message = str(document.get("message", ""))
        if code >= 500 and (PANIC in message or not (
                KUBES_OWN_5XX.search(message) or KUBES_OWN_5XX.search(
                    str(document.get("reason", ""))))):
            raise AssertionError(f"a {code} of the gateway's own: {body[:500]!r}")
        return None
    text = body.decode("utf-8", "replace")
    if any(code == known and pattern.search(text) for known, pattern in PLAIN_TEXT_ERRORS):
        return None
    raise AssertionError(f"a {code} that is not a metav1.Status: {body[:500]!r}")


#: ``STATUS_LOG_ENV`` names a file the check appends every response's status code to, with
#: its operation (``code METHOD /path``).
STATUS_LOG_ENV = "GATEWAY_FUZZ_STATUS_LOG"


def _count(code: int, case: Any, body: bytes) -> None:
    """One line per response: its status code, the method and the operation's path, and for
    a 5xx the start of its body (which of kube's own it was)."""
    path = os.environ.get(STATUS_LOG_ENV)
    if path:
        said = "\t" + body[:200].decode("utf-8", "replace").replace("\n", " ") \
            if code >= 500 else ""
        with _lock, open(path, "a") as log:
            log.write(f"{code} {case.method.upper()} {case.operation.path}{said}\n")


# -- running it -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one schemathesis run did."""

    returncode: int
    cases: int
    operations: int
    statuses: Counter[int]
    output: str
    seconds: float
    #: The seed the run used (its own when none was given), to run the same cases again.
    seed: int | None = None


def merged_v3(fetch: Any) -> dict[str, Any]:
    """Every group version's /openapi/v3 document merged into one (``fetch(path)`` answers a
    path's JSON)."""
    index = fetch("/openapi/v3")
    merged: dict[str, Any] = {"openapi": "3.0.0", "info": {"title": "gateway", "version": "v1"},
                              "paths": {}, "components": {"schemas": {}}}
    for name, entry in sorted(index["paths"].items()):
        if not (name.startswith("api/") or name.startswith("apis/")):
            continue
        document = fetch(entry["serverRelativeURL"])
        merged["paths"].update(document.get("paths") or {})
        components = document.get("components") or {}
        for kind, values in components.items():
            merged["components"].setdefault(kind, {}).update(values)
    return merged


class Run:
    """``st run`` on ``spec`` (a URL or a file) against the gateway at ``url`` as its admin,
    with this module's hooks and check, started at once and awaited by ``finish``: runs on two
    documents go side by side (schemathesis' generation, not the gateway, takes the time, and
    its workers are threads of one process)."""

    def __init__(self, url: str, spec: str, cert_dir: Path, report_dir: Path, *, examples: int,
                 seed: int | None, phases: str = "examples,fuzzing", workers: int = 4,
                 timeout: float = 1800) -> None:
        report_dir.mkdir(parents=True, exist_ok=True)
        self.report = report_dir / "report.json"
        self.status_log = report_dir / "statuses.txt"
        self.timeout = timeout
        command = [
            str(Path(sys.executable).parent / "st"), "run", spec, "--url", url,
            "--tls-verify", str(cert_dir / "ca.crt"),
            "--request-cert", str(cert_dir / "admin.crt"),
            "--request-cert-key", str(cert_dir / "admin.key"),
            "--checks", "kube_answers", "--max-examples", str(examples),
            "--phases", phases, "--no-shrink", "--workers", str(workers),
            "--request-timeout", "30", "--continue-on-failure",
            # hypothesis' health checks judge the generation (too slow on a busy machine, too
            # large), not the gateway: a run must not fail by the machine's load
            "--suppress-health-check", "all",
            "--report", "json", "--report-json-path", str(self.report),
        ]
        if seed is not None:
            command += ["--seed", str(seed)]
        env = {**os.environ, "SCHEMATHESIS_HOOKS": __name__, "NO_COLOR": "1",
               STATUS_LOG_ENV: str(self.status_log),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parents[2]),
                                                           os.environ.get("PYTHONPATH")]))}
        self.output_path = report_dir / "output.txt"
        self._output = open(self.output_path, "wb")  # noqa: SIM115 - the child writes it
        self.started = time.monotonic()
        # cwd: schemathesis keeps hypothesis' example database there; a fresh one each run
        self.proc = subprocess.Popen(command, stdout=self._output, stderr=subprocess.STDOUT,
                                     env=env, cwd=report_dir)

    def finish(self) -> Outcome:
        try:
            returncode = self.proc.wait(self.timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            returncode = self.proc.wait()
        finally:
            self._output.close()
        seconds = time.monotonic() - self.started
        output = self.output_path.read_text(errors="replace")
        report: dict[str, Any] = {}
        if self.report.exists():
            report = json.loads(self.report.read_text())
        statuses: Counter[int] = Counter()
        if self.status_log.exists():
            lines = self.status_log.read_text().splitlines()
            statuses.update(int(line.split()[0]) for line in lines)
        return Outcome(returncode, (report.get("test_cases") or {}).get("generated", 0),
                       (report.get("operations") or {}).get("tested", 0), statuses, output,
                       seconds, report.get("seed"))

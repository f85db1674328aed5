"""The query parameters of list and watch, parsed and validated as kube-apiserver does.

Validation failures of the options themselves are 422 Invalid (kind ListOptions, group
meta.k8s.io); a selector that does not parse is 400.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from gateway.endpoints import status
from gateway.endpoints.request import int64_param
from gateway.registry.fields import FieldSelector, parse_field_selector
from gateway.registry.labels import LabelSelector, SelectorError, parse_label_selector

EXACT, NOT_OLDER_THAN = "Exact", "NotOlderThan"


@dataclass
class ListOptions:
    label_selector: LabelSelector = field(default_factory=lambda: LabelSelector(()))
    field_selector: FieldSelector = field(default_factory=lambda: FieldSelector(()))
    resource_version: str = ""
    resource_version_match: str = ""
    limit: int = 0
    continue_token: str = ""
    watch: bool = False
    allow_watch_bookmarks: bool = False
    send_initial_events: bool | None = None
    timeout_seconds: int | None = None

    @property
    def revision(self) -> int:
        """resourceVersion as a revision; "" and "0" are 0."""
        return int(self.resource_version) if self.resource_version not in ("", "0") else 0


def _bool(request: web.BaseRequest, name: str) -> bool | None:
    value = request.query.get(name)
    if value is None:
        return None
    return value.lower() not in ("false", "0", "")


def _invalid(message: str, field: str, reason: str = "FieldValueForbidden") -> status.StatusError:
    return status.invalid("ListOptions", "", [status.Cause(reason, message, field)],
                          group="meta.k8s.io")


def parse_list_options(request: web.BaseRequest, selectable: frozenset[str],
                       *, watch: bool) -> ListOptions:
    query = request.query
    try:
        labels = parse_label_selector(query.get("labelSelector", ""))
        fields = parse_field_selector(query.get("fieldSelector", ""), selectable)
    except SelectorError as err:
        raise status.bad_request(str(err)) from None
    options = ListOptions(
        label_selector=labels,
        field_selector=fields,
        resource_version=query.get("resourceVersion", ""),
        resource_version_match=query.get("resourceVersionMatch", ""),
        limit=max(int64_param(request, "limit") or 0, 0),
        continue_token=query.get("continue", ""),
        watch=watch,
        allow_watch_bookmarks=bool(_bool(request, "allowWatchBookmarks")),
        send_initial_events=_bool(request, "sendInitialEvents"),
        timeout_seconds=int64_param(request, "timeoutSeconds"),
    )
    _check_resource_version(options.resource_version)
    if watch:
        _validate_watch(options)
    else:
        _validate_list(options)
    return options


def _check_resource_version(rv: str) -> None:
    if rv in ("", "0"):
        return
    if not rv.isdigit() or int(rv) >= 2**64:  # what strconv.ParseUint(rv, 10, 64) takes
        raise status.bad_request(f'Invalid value: "{rv}": resourceVersion must be an integer')


def _validate_list(options: ListOptions) -> None:
    match = options.resource_version_match
    if match:
        if not options.resource_version:
            raise _invalid("resourceVersionMatch is forbidden unless resourceVersion is "
                           "provided", "resourceVersionMatch")
        if options.continue_token:
            raise _invalid("resourceVersionMatch is forbidden when continue is provided",
                           "resourceVersionMatch")
        if match not in (EXACT, NOT_OLDER_THAN):
            raise _invalid(f'Unsupported value: "{match}": supported values: "Exact", '
                           '"NotOlderThan", ""', "resourceVersionMatch", "FieldValueNotSupported")
        if match == EXACT and options.resource_version == "0":
            raise _invalid('resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
                           "resourceVersionMatch")
    if options.send_initial_events is not None:
        raise _invalid("sendInitialEvents is forbidden for list", "sendInitialEvents")
    if options.continue_token and options.resource_version not in ("", "0"):
        raise status.bad_request("specifying resource version is not allowed when using "
                                 "continue")


def _validate_watch(options: ListOptions) -> None:
    match = options.resource_version_match
    if options.send_initial_events is not None and match != NOT_OLDER_THAN:
        raise _invalid("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                       "resourceVersionMatch")
    if match:
        if options.send_initial_events is None:
            raise _invalid("resourceVersionMatch is forbidden for watch unless "
                           "sendInitialEvents is provided", "resourceVersionMatch")
        if match != NOT_OLDER_THAN:
            raise _invalid(f'Unsupported value: "{match}": supported values: "NotOlderThan"',
                           "resourceVersionMatch", "FieldValueNotSupported")
        if options.continue_token:
            raise _invalid("resourceVersionMatch is forbidden when continue is provided",
                           "resourceVersionMatch")

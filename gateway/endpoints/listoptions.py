"""The query parameters of list and watch, parsed and validated as kube-apiserver does.

Validation failures of the options themselves are 422 Invalid (kind ListOptions, group
meta.k8s.io); a number or selector that does not parse is 400. A resourceVersion that is no
revision is the storage layer's to refuse (resource_version_error), as in kube.
"""

from __future__ import annotations

from aiohttp import web

from gateway.apimachinery import status
from gateway.apimachinery.fields import check_field_labels, parse_field_selector
from gateway.apimachinery.gowords import go_quote
from gateway.apimachinery.labels import SelectorError, parse_label_selector
from gateway.apimachinery.listoptions import EXACT, NOT_OLDER_THAN, ListOptions
from gateway.endpoints.request import int64_param


def _bool(request: web.BaseRequest, name: str) -> bool | None:
    """kube's boolean query parameters: only "0" and "false" (any case) are false; anything
    else, even "", is true."""
    value = request.query.get(name)
    if value is None:
        return None
    return value != "0" and value.lower() != "false"


def _forbidden(field: str, detail: str) -> status.Cause:
    return status.Cause("FieldValueForbidden", f"Forbidden: {detail}", field)


def _not_supported(field: str, value: str, supported: tuple[str, ...]) -> status.Cause:
    return status.Cause("FieldValueNotSupported", f"Unsupported value: {go_quote(value)}: "
                        "supported values: " + ", ".join(go_quote(v) for v in supported), field)


def parse_list_options(request: web.BaseRequest, selectable: frozenset[str],
                       *, watch: bool, own_field_labels: bool = True) -> ListOptions:
    """The options in kube's order: the numbers (400 with strconv's error), the selectors
    (400), ValidateListOptions (422, every problem at once), then the field labels the
    resource knows (400). ``own_field_labels`` says whether the resource has a field label
    conversion of its own (see fields.parse_field_selector)."""
    query = request.query
    timeout_seconds = int64_param(request, "timeoutSeconds")
    limit = int64_param(request, "limit")
    try:
        labels = parse_label_selector(query.get("labelSelector", ""))
        fields = parse_field_selector(query.get("fieldSelector", ""))
    except SelectorError as err:
        raise status.bad_request(str(err)) from None
    options = ListOptions(
        label_selector=labels,
        field_selector=fields,
        resource_version=query.get("resourceVersion", ""),
        resource_version_match=query.get("resourceVersionMatch", ""),
        limit=max(limit or 0, 0),
        continue_token=query.get("continue", ""),
        watch=watch,
        allow_watch_bookmarks=bool(_bool(request, "allowWatchBookmarks")),
        send_initial_events=_bool(request, "sendInitialEvents"),
        timeout_seconds=timeout_seconds,
    )
    causes = _watch_causes(options) if watch else _list_causes(options)
    if causes:
        raise status.invalid_options("ListOptions", causes)
    if not watch and options.continue_token and options.resource_version not in ("", "0"):
        raise status.bad_request("specifying resource version is not allowed when using "
                                 "continue")
    try:
        check_field_labels(fields, selectable, own_conversion=own_field_labels)
    except SelectorError as err:
        raise status.bad_request(str(err)) from None
    return options


def _list_causes(options: ListOptions) -> list[status.Cause]:
    causes = []
    match = options.resource_version_match
    if match:
        if not options.resource_version:
            causes.append(_forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden "
                                     "unless resourceVersion is provided"))
        if options.continue_token:
            causes.append(_forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden "
                                     "when continue is provided"))
        if match not in (EXACT, NOT_OLDER_THAN):
            causes.append(_not_supported("resourceVersionMatch", match,
                                         (EXACT, NOT_OLDER_THAN, "")))
        if match == EXACT and options.resource_version == "0":
            causes.append(_forbidden("resourceVersionMatch", 'resourceVersionMatch "exact" is '
                                     'forbidden for resourceVersion "0"'))
    if options.send_initial_events is not None:
        causes.append(_forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return causes


def _watch_causes(options: ListOptions) -> list[status.Cause]:
    causes = []
    match = options.resource_version_match
    if options.send_initial_events is not None and match != NOT_OLDER_THAN:
        causes.append(_forbidden("resourceVersionMatch", "sendInitialEvents requires setting "
                                 "resourceVersionMatch to NotOlderThan"))
    if match:
        if options.send_initial_events is None:
            causes.append(_forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden "
                                     "for watch unless sendInitialEvents is provided"))
        if match != NOT_OLDER_THAN:
            causes.append(_not_supported("resourceVersionMatch", match, (NOT_OLDER_THAN,)))
        if options.continue_token:
            causes.append(_forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden "
                                     "when continue is provided"))
    return causes

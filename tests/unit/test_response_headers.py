"""The headers the filters set before the handler runs (Audit-ID, Cache-Control, CORS) reach
every response: one the handler returns unprepared, one it streams (``prepare_response``), and
a Status made from an error raised past the filters."""

from __future__ import annotations

from aiohttp import web

from gateway.apimachinery import status
from gateway.apimachinery.context import REQUEST_INFO, prepare_response
from gateway.apimachinery.requestinfo import RequestInfo
from gateway.server.filters.cors import with_cors
from gateway.server.filters.limits import with_cache_control
from gateway.server.filters.recovery import with_panic_recovery
from gateway.server.filters.requestid import with_request_id

ORIGIN = "https://console.example.com"


async def handler(request: web.BaseRequest) -> web.StreamResponse:
    if request.path == "/streamed":
        response = web.StreamResponse(headers={"Cache-Control": "public",
                                               "Audit-ID": request.headers["Audit-ID"]})
        await prepare_response(request, response)
        await response.write(b"streamed")
        await response.write_eof()
        return response
    if request.path == "/own":
        return web.Response(text="own", headers={"Cache-Control": "public"})
    raise status.StatusError(401, "Unauthorized", "Unauthorized")


def chain():
    async def request_info(request: web.BaseRequest) -> web.StreamResponse:
        request[REQUEST_INFO] = RequestInfo(is_resource_request=False, path=request.path,
                                            verb="get")
        return await inner(request)

    inner = with_panic_recovery(with_cache_control(with_cors(handler, [f"^{ORIGIN}$"])))
    return with_request_id(request_info)


async def test_every_response_carries_the_filters_headers(aiohttp_raw_server,
                                                           aiohttp_client) -> None:
    client = await aiohttp_client(await aiohttp_raw_server(chain()))
    sent = {"Origin": ORIGIN, "Audit-ID": "abc"}
    async with client.get("/streamed", headers=sent) as response:
        assert await response.text() == "streamed"
        # the filters' value first, the handler's after (kube's ReverseProxy adds the
        # backend's); an equal value is not repeated
        assert response.headers.getall("Cache-Control") == ["no-cache, private", "public"]
        assert response.headers.getall("Audit-ID") == ["abc"]
        assert response.headers["Access-Control-Allow-Origin"] == ORIGIN
    async with client.get("/own", headers=sent) as response:
        # a handler that builds its own response sets the header: its value alone
        assert response.headers.getall("Cache-Control") == ["public"]
        assert response.headers["Access-Control-Allow-Origin"] == ORIGIN
        assert response.headers.getall("Audit-ID") == ["abc"]
    async with client.get("/refused", headers=sent) as response:
        assert response.status == 401
        assert response.headers.getall("Cache-Control") == ["no-cache, private"]
        assert response.headers["Access-Control-Allow-Origin"] == ORIGIN
        assert response.headers.getall("Audit-ID") == ["abc"]
    async with client.get("/refused", headers={"Origin": "https://evil.example.com"}) as response:
        assert "Access-Control-Allow-Origin" not in response.headers

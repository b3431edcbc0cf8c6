"""The emulator over HTTP: URLs parsed, requests routed to the store, answers as JSON.

`KubeApiEmulator` is the aiohttp handler. It parses `/api/v1/namespaces[/NAME[/status]]` and
the other resource URLs (kmock's parser fails on those), ignores trailing slashes, lets user
reactions added with kmock's DSL (`emulator['get /x'] << ...`) answer first, and serves the
rest: lists (with selectors and `Accept: ...;as=Table`), gets, writes, watches (`_watch`),
discovery and OpenAPI (`_discovery`). Every error is a Kubernetes `Status` body.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import aiohttp.web
import attrs
import kmock

from latency_tuner.sandbox.apiserver import _protobuf as protobuf
from latency_tuner.sandbox.apiserver._discovery import document
from latency_tuner.sandbox.apiserver._errors import bad_request, error, not_found, status_body
from latency_tuner.sandbox.apiserver._resources import Body, ResourceDef
from latency_tuner.sandbox.apiserver._table import table
from latency_tuner.sandbox.apiserver._watch import stream_watch
from latency_tuner.sandbox.apiserver._writes import Options, Target, WritingEmulator

logger = logging.getLogger("latency_tuner.sandbox.apiserver")


@attrs.define(kw_only=True)
class KubeApiEmulator(WritingEmulator):
    """kmock's Kubernetes emulator with the gaps filled (see the package docstring).

    kmock's own implicit fallbacks (discovery, list/watch/fetch/create/update/delete) are replaced
    wholesale: requests that no user reaction answers are served by `_serve()`.
    """

    _request_count: int = attrs.field(default=0, init=False)

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        # Replaces kmock's entry point because its request parser fails on /api/v1/namespaces.
        body = await raw_request.read()
        try:
            try:
                data = json.loads(body) if body else None
            except ValueError:
                data = None
            try:
                target = self._parse_target(raw_request.path)
            except kmock.KubernetesError:  # unknown resource: 404 later, unless a reaction answers
                target = None
            method = raw_request.method.upper()
            params = dict(raw_request.query)
            request = kmock.Request(
                id=self._request_count,
                raw_request=raw_request,
                url=raw_request.url,
                method=method,
                params=params,
                headers=dict(raw_request.headers),
                cookies=dict(raw_request.cookies),
                body=body,
                text=body.decode("utf-8", errors="replace"),
                data=data,
                action=self._guess_action(target, method, params),
                resource=target.rdef.kmock_resource if target else None,
                namespace=target.namespace if target else None,
                name=target.name if target else None,
                subresource=target.subresource if target else None,
            )
            self._request_count += 1
            self._requests.append(request)
            del self._requests[: -self.requests_kept]
            return await self._handle(request)
        except kmock.KubernetesError as e:
            return await self._render_error(e)
        except Exception as e:
            logger.exception(
                "The API emulator failed on %s %s", raw_request.method, raw_request.path
            )
            return await self._render_error(e)

    async def _render_error(self, exc: Exception) -> aiohttp.web.StreamResponse:
        if isinstance(exc, kmock.KubernetesError):
            body = status_body(exc.status, exc.reason or "", exc.message or "", exc.details or {})
        else:
            body = status_body(500, "InternalError", f"an error on the server: {exc!r}", {})
        return aiohttp.web.json_response(body, status=body["code"])

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        try:  # the user's reactions (kmock's DSL) first, skipping kmock's emulator logic
            response: aiohttp.web.StreamResponse = await kmock.RawHandler._handle(self, request)
            return response
        except NotImplementedError:
            return await self._serve(request)

    @staticmethod
    def _guess_action(target: Target | None, method: str, params: Mapping[str, str]) -> Any:
        if target is None:
            return None
        if method == "GET":
            if params.get("watch") in ("true", "1"):
                return kmock.action.WATCH
            return kmock.action.FETCH if target.name else kmock.action.LIST
        return {
            "POST": kmock.action.CREATE,
            "PUT": kmock.action.UPDATE,
            "PATCH": kmock.action.UPDATE,
            "DELETE": kmock.action.DELETE,
        }.get(method)

    def _parse_target(self, path: str) -> Target | None:
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 3 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 4 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = None
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and self.served_resource(group, version, rest[2]) is not None
        ):
            namespace, rest = rest[1], rest[2:]
        rdef = self.served_resource(group, version, rest[0])
        if rdef is None:
            raise error(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        subresource = "/".join(rest[2:]) or None
        return Target(rdef, namespace if rdef.namespaced else None, name, subresource)

    async def _serve(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        path = "/" + "/".join(p for p in request.url.path.split("/") if p)
        method = request.method.value if hasattr(request.method, "value") else str(request.method)
        raw = request._raw_request
        assert raw is not None
        target = self._parse_target(path)  # 404 for unknown resources
        if target is None:
            if method not in ("GET", "HEAD"):
                raise error(405, "MethodNotAllowed", f"{method} is not supported on {path}")
            return self._serve_static(path, raw)
        params = request.params
        opts = Options(
            dry_run=params.get("dryRun") == "All",
            strict=params.get("fieldValidation") == "Strict",
        )
        rdef = target.rdef
        if target.subresource not in (None, "status") or (
            target.subresource == "status" and "status" not in rdef.subresources
        ):
            raise error(404, "NotFound", "the server could not find the requested resource")
        if method == "GET" and params.get("watch") in ("true", "1"):
            return await stream_watch(self, target, params, raw)
        if method == "GET" and target.name is None:
            items = self._items(rdef, target.namespace, params)
            if "as=Table" in raw.headers.get("Accept", ""):
                return aiohttp.web.json_response(self._table(rdef, items))
            return aiohttp.web.json_response(self._list_body(rdef, items))
        if method == "GET":
            obj = self._load(rdef, target.namespace, target.name or "")
            if obj is None:
                raise not_found(rdef, target.name or "")
            if "as=Table" in raw.headers.get("Accept", ""):
                return aiohttp.web.json_response(self._table(rdef, [obj]))
            return aiohttp.web.json_response(obj)
        if method == "POST" and target.name is None:
            data = request.data
            if "protobuf" in raw.headers.get("Content-Type", ""):
                try:
                    data = protobuf.decode(request.body)
                except protobuf.NotReadable as exc:
                    raise error(415, "UnsupportedMediaType", f"protobuf body: {exc}") from exc
            created = self._create(rdef, target.namespace, data, opts)
            return aiohttp.web.json_response(created, status=201)
        if method == "PUT" and target.name is not None:
            return aiohttp.web.json_response(self._replace(target, request.data, opts))
        if method == "PATCH" and target.name is not None:
            content_type = raw.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if request.data is None:
                raise bad_request("the body of the request was in an unknown format")
            return aiohttp.web.json_response(self._patch(target, request.data, content_type, opts))
        if method == "DELETE" and target.name is not None:
            return aiohttp.web.json_response(self._delete(target, request.data, opts))
        if method == "DELETE":
            items = self._items(rdef, target.namespace, params)
            for item in items:
                meta = item["metadata"]
                self._delete(Target(rdef, meta.get("namespace"), meta["name"], None), {}, opts)
            return aiohttp.web.json_response(self._list_body(rdef, items))
        raise error(405, "MethodNotAllowed", f"{method} is not supported on {path}")

    def _list_body(self, rdef: ResourceDef, items: list[Body]) -> Body:
        return {
            "kind": f"{rdef.kind}List",
            "apiVersion": rdef.api_version,
            "metadata": {"resourceVersion": str(self.current_rv)},
            "items": items,
        }

    def _table(self, rdef: ResourceDef, items: list[Body]) -> Body:
        return table(rdef, items, str(self.current_rv))

    def _serve_static(self, path: str, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        if path in ("/healthz", "/readyz", "/livez"):
            return aiohttp.web.Response(text="ok")
        body = document(self.served(), path, raw.host or "127.0.0.1")
        if body is None:
            raise error(404, "NotFound", "the server could not find the requested resource")
        return aiohttp.web.json_response(body)

"""The proxy service: a Starlette application over a :class:`~dpdpca.net.collection.Collection`.

Routes (bodies are ``application/octet-stream`` protocol messages, answers
without a message body are one JSON object ``{"status", "detail"}``):

==========================  ======  ===============  ==========================================
route                       method  party            answer
==========================  ======  ===============  ==========================================
``/v1/status``              GET     any known party  phase, accepted count, quorum, deadline
``/v1/shares/{owner_id}``   POST    ``owner:<id>``   201 accepted, 200 duplicate, 409 conflict,
                                                     410 late, 400 invalid, 413 too large
``/v1/result``              GET     ``user``         the ``MASKED_RESULT`` (released once, the same
                                                     bytes every time); 409 before, 410 if lost
==========================  ======  ===============  ==========================================

Every request is authenticated before its body is read (party, time, token;
401 for an unknown party or a bad credential, 403 for a known party on
another's route) and its signature checked once the body has streamed in.
The body size limit is enforced on ``Content-Length`` and again while the
body streams, so an oversized upload is cut off, not buffered.  A client
that disconnects mid-upload leaves nothing behind.

Why Starlette alone: five routes with raw byte bodies, streaming access to
the request body, a lifespan hook for the deadline timer and an in-process
test client are all it offers; FastAPI adds JSON-model validation and OpenAPI
generation (and pydantic) that octet-stream messages do not use.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator
from typing import Any

from dpdpca.net import require
from dpdpca.net.auth import AuthError, PartyKeys
from dpdpca.net.collection import Collection, Outcome

__all__ = ["OCTET", "create_app"]

OCTET = "application/octet-stream"


class _TooLarge(Exception):
    pass


class _Gone(Exception):
    pass


def create_app(collection: Collection, keys: PartyKeys, *, max_body_bytes: int, tick_s: float = 0.2) -> Any:
    """The ASGI application.

    Parameters
    ----------
    collection : Collection
    keys : PartyKeys
        Known parties and their verify keys (and tokens).
    max_body_bytes : int
        Largest accepted request body.
    tick_s : float
        How often the lifespan task checks the deadline.

    Returns
    -------
    starlette.applications.Starlette
    """
    applications = require("starlette.applications")
    responses = require("starlette.responses")
    routing = require("starlette.routing")
    concurrency = require("starlette.concurrency")
    requests = require("starlette.requests")

    def answer(outcome: Outcome) -> Any:
        if outcome.body is not None:
            return responses.Response(outcome.body, status_code=outcome.code, media_type=OCTET,
                                      headers={"x-dpdpca-status": outcome.status})
        return responses.JSONResponse(outcome.as_json(), status_code=outcome.code)

    def refuse(code: int, status: str, detail: str) -> Any:
        return answer(Outcome(code, status, detail))

    async def read_body(request: Any) -> tuple[bytes, str]:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_body_bytes:
            raise _TooLarge(int(declared))
        chunks: list[bytes] = []
        size = 0
        digest = hashlib.sha256()
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_body_bytes:
                    raise _TooLarge(size)
                digest.update(chunk)
                chunks.append(chunk)
        except requests.ClientDisconnect:
            raise _Gone() from None
        return b"".join(chunks), digest.hexdigest()

    async def authenticated(request: Any, allowed: str | None) -> tuple[str, bytes] | Any:
        """``(party, body)`` or the refusal to send."""
        try:
            party = keys.authenticate_headers(request.headers)
            if allowed is not None and party != allowed:
                raise AuthError(f"this route is for {allowed}, got {party}", status=403)
            body, sha = await read_body(request)
            keys.verify_signature(request.headers, request.method, request.url.path, sha)
        except AuthError as exc:
            return refuse(exc.status, "unauthorized" if exc.status == 401 else "forbidden", str(exc))
        except _Gone:  # the client disconnected mid-upload: nothing was stored, it may resend
            return refuse(400, "truncated", "upload was cut short")
        except _TooLarge as exc:
            return refuse(413, "too_large", f"body must be <= {max_body_bytes} bytes, got {exc.args[0]} or more")
        return party, body

    async def status(request: Any) -> Any:
        auth = await authenticated(request, None)
        if not isinstance(auth, tuple):
            return auth
        return responses.JSONResponse(await concurrency.run_in_threadpool(collection.status))

    async def close_later() -> None:
        await concurrency.run_in_threadpool(collection.close_if_due)

    async def post_share(request: Any) -> Any:
        owner_id = request.path_params["owner_id"]
        auth = await authenticated(request, f"owner:{owner_id}")
        if not isinstance(auth, tuple):
            return auth
        outcome = await concurrency.run_in_threadpool(collection.submit_share, owner_id, auth[1])
        response = answer(outcome)
        if outcome.status == "accepted":
            background = require("starlette.background")
            response.background = background.BackgroundTask(close_later)
        return response

    async def get_result(request: Any) -> Any:
        auth = await authenticated(request, "user")
        if not isinstance(auth, tuple):
            return auth
        return answer(await concurrency.run_in_threadpool(collection.result))

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        async def deadline_timer() -> None:
            while True:
                await asyncio.sleep(tick_s)
                await concurrency.run_in_threadpool(collection.close_if_due)

        task = asyncio.create_task(deadline_timer())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    routes = [
        routing.Route("/v1/status", status, methods=["GET"]),
        routing.Route("/v1/shares/{owner_id}", post_share, methods=["POST"]),
        routing.Route("/v1/result", get_result, methods=["GET"]),
    ]
    return applications.Starlette(routes=routes, lifespan=lifespan)

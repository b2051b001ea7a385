"""The proxy service: a Starlette application over a :class:`~dpdpca.net.collection.Collection`.

Routes (bodies are ``application/octet-stream`` protocol messages, answers
without a message body are one JSON object ``{"status", "detail"}``):

==========================  ======  ===============  ==========================================
route                       method  party            answer
==========================  ======  ===============  ==========================================
``/v1/status``              GET     any known party  phase, accepted count, quorum, deadline
                                                     (N of a centred release: ``user`` only)
``/v1/shares/{owner_id}``   POST    ``owner:<id>``   201 accepted, 200 duplicate, 409 conflict,
                                                     410 late, 400 invalid, 413 too large
``/v1/result``              GET     ``user``         the ``MASKED_RESULT`` (released once, the same
                                                     bytes every time); 409 before, 410 if lost
``/v1/session``             GET     anyone           the session summary (owner ids, quorum,
                                                     deadline, release, budget): read-only
``/``                       GET     anyone           the same as a plain HTML page that refreshes
                                                     itself (:mod:`dpdpca.net.status_page`)
==========================  ======  ===============  ==========================================

The last two are absent (404) with ``public_status=False`` (``proxy.toml``
``[server] public_status = false``).

Every request is authenticated from its headers alone, before a byte of its
body is read (party, time, token and the Ed25519 signature over method,
path, body length and body digest, :mod:`dpdpca.net.auth`; 401 for an
unknown party or a bad credential, 403 for a known party on another's
route, 413 above ``max_body_bytes``, 411 without a ``Content-Length``).  Every
refusal before the body is read answers with ``Connection: close``, so a
stranger's body is never read: the connection is closed after its headers.
Only an authenticated request tells the connection guard that its body
follows (:func:`dpdpca.net.guard.signed_body_follows`); any other answer
given while a body is still arriving (a public page, 404, 405) also closes
the connection (the guard adds ``Connection: close``).
An authenticated body is read up to its signed length only and must match
its signed digest (401 otherwise).  A client that disconnects mid-upload
leaves nothing behind.  Timeouts and the connection cap live below HTTP
(:mod:`dpdpca.net.guard`).

Why Starlette alone: five routes with raw byte bodies, streaming access to
the request body, a lifespan hook for the deadline timer and an in-process
test client are all it offers; FastAPI adds JSON-model validation and OpenAPI
generation (and pydantic) that octet-stream messages do not use.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
from collections.abc import AsyncIterator
from typing import Any

from dpdpca.net import require
from dpdpca.net.auth import AuthError, PartyKeys, SignedRequest
from dpdpca.net.collection import LOG, Collection, Outcome, _one_line
from dpdpca.net.guard import signed_body_follows
from dpdpca.net.status_page import render_status_page

__all__ = ["OCTET", "create_app"]

OCTET = "application/octet-stream"


class _Mismatch(Exception):
    pass


class _Gone(Exception):
    pass


def create_app(collection: Collection, keys: PartyKeys, *, max_body_bytes: int, tick_s: float = 0.2,
               public_status: bool = True) -> Any:
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

    def refuse_and_close(code: int, status: str, detail: str) -> Any:
        """A refusal before the body was read: the connection closes, so the unread body is never read."""
        response = refuse(code, status, detail)
        response.headers["connection"] = "close"
        return response

    async def read_body(request: Any, signed: SignedRequest) -> bytes:
        chunks: list[bytes] = []
        size = 0
        digest = hashlib.sha256()
        try:
            async for chunk in request.stream():
                size += len(chunk)
                if size > signed.body_length:
                    raise _Mismatch(f"body must be its signed {signed.body_length} bytes, got more")
                digest.update(chunk)
                chunks.append(chunk)
        except requests.ClientDisconnect:
            raise _Gone() from None
        if size != signed.body_length:
            raise _Mismatch(f"body must be its signed {signed.body_length} bytes, got {size}")
        if not hmac.compare_digest(digest.hexdigest(), signed.body_sha256):
            raise _Mismatch("body must match its signed SHA-256, got another body")
        return b"".join(chunks)

    def _log_refusal(request: Any, code: int, reason: str) -> None:
        LOG.warning("request refused: %d %s %s (claimed party %.80r): %.200s", code, request.method,
                    request.url.path, request.headers.get("x-dpdpca-party", ""), " ".join(reason.split()))

    async def authenticated(request: Any, allowed: str | None) -> tuple[str, bytes] | Any:
        """``(party, body)`` or the refusal to send."""
        if request.method == "POST" and "content-length" not in request.headers:
            return refuse_and_close(411, "length_required", "a POST must carry Content-Length (no chunked bodies)")
        try:
            signed = keys.authenticate_headers(request.headers, request.method, request.url.path)
            if allowed is not None and signed.party != allowed:
                raise AuthError(f"this route is for {allowed}, got {signed.party}", status=403)
        except AuthError as exc:
            _log_refusal(request, exc.status, str(exc))
            return refuse_and_close(exc.status, "unauthorized" if exc.status == 401 else "forbidden", str(exc))
        if signed.body_length > max_body_bytes:
            _log_refusal(request, 413, f"a declared body of {signed.body_length} bytes (limit {max_body_bytes})")
            return refuse_and_close(413, "too_large",
                                    f"body must be <= {max_body_bytes} bytes, got {signed.body_length}")
        signed_body_follows(request.scope)  # only now may the connection take body_timeout_s for the body
        try:
            body = await read_body(request, signed)
        except _Gone:  # the client disconnected mid-upload: nothing was stored, it may resend
            LOG.warning("request refused: %s %s was cut short; nothing stored", request.method, request.url.path)
            return refuse(400, "truncated", "upload was cut short")
        except _Mismatch as exc:  # what was signed is not what came: the request is not authenticated
            _log_refusal(request, 401, str(exc))
            return refuse_and_close(401, "unauthorized", str(exc))
        return signed.party, body

    async def status(request: Any) -> Any:
        auth = await authenticated(request, None)
        if not isinstance(auth, tuple):
            return auth
        return responses.JSONResponse(await concurrency.run_in_threadpool(collection.status, auth[0]))

    async def session(request: Any) -> Any:
        return responses.JSONResponse(await concurrency.run_in_threadpool(collection.session),
                                      headers={"cache-control": "no-store"})

    async def page(request: Any) -> Any:
        html = render_status_page(await concurrency.run_in_threadpool(collection.session))
        return responses.HTMLResponse(html, headers={"cache-control": "no-store",
                                                     "content-security-policy": "default-src 'none'; "
                                                                                "style-src 'unsafe-inline'"})

    async def close_if_due(what: str, then: str) -> None:
        """The collection's close check off the event loop; a failure is one log line, never the caller's end."""
        try:
            await concurrency.run_in_threadpool(collection.close_if_due)
        except Exception as exc:
            LOG.error("%s failed (%s: %s); %s %s s", what, type(exc).__name__, _one_line(str(exc)), then, tick_s)

    async def close_later() -> None:  # the share is stored and acknowledged; the deadline timer checks again
        await close_if_due("closing after an accepted share", "the next check runs within")

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
            while True:  # one failed tick is logged, never the end of the deadline's watch
                await asyncio.sleep(tick_s)
                await close_if_due("the deadline check", "it runs again in")

        task = asyncio.create_task(deadline_timer())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    routes = [
        *([routing.Route("/", page, methods=["GET"]), routing.Route("/v1/session", session, methods=["GET"])]
          if public_status else []),
        routing.Route("/v1/status", status, methods=["GET"]),
        routing.Route("/v1/shares/{owner_id}", post_share, methods=["POST"]),
        routing.Route("/v1/result", get_result, methods=["GET"]),
    ]
    return applications.Starlette(routes=routes, lifespan=lifespan)

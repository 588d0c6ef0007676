"""What a request still running when the server stops is answered: a JSON 503, not a traceback.

On SIGTERM uvicorn gives requests in flight `timeout_graceful_shutdown` seconds, then cancels
them; a cancelled app made uvicorn log "Exception in ASGI application" with a CancelledError
traceback and answer a plain-text "Internal Server Error". The client is better told the truth,
in the protocol's own shape: the server is stopping, and the session it was using goes with it.
"""

from __future__ import annotations

import asyncio
import json

STOPPING = ("the server is shutting down and this request was cut off; its session is closed with the "
            "server: start again (reset or create) once a server answers")


class AnswerWhenStopped:
    """ASGI middleware: a request cancelled before its answer started gets a JSON 503 instead."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def tracked(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except asyncio.CancelledError:
            if started:  # half an answer is on the wire: nothing sensible can follow it
                raise
            # The cancellation is answered, not propagated: re-raising it is what made uvicorn log
            # the traceback. This task ends right after; nothing else waits on it.
            body = json.dumps({"error": STOPPING}).encode()
            await send({"type": "http.response.start", "status": 503, "headers": [
                (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})

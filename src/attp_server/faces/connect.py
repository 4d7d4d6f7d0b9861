"""The pages a person's browser visits to connect their own account to an upstream server (``identity =
"per_user"``, `attp_server.toolpacks.mcp.personal`): ``GET /oauth/connect?state=…`` says whose account is being
connected to which server and leads on to its authorization server; ``GET /oauth/callback`` is where that server
sends the browser back, on any replica. Both need no token (a browser has none): the unguessable, single-use
``state`` is what names the flow. The first page is there so that a person who opens someone else's link sees
that it would connect their account for someone else, and stops.
"""

from __future__ import annotations

import html
import logging

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from attp_server.settings import Settings
from attp_server.store import StoreError
from attp_server.toolpacks.mcp.personal import CALLBACK_PATH, CONNECT_PATH, PersonalError, finish_connect, pending

logger = logging.getLogger(__name__)

PATHS = frozenset({CONNECT_PATH, CALLBACK_PATH})


def page(status: int, title: str, text: str, link: tuple[str, str] | None = None) -> HTMLResponse:
    body = f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title><h1>{html.escape(title)}</h1>"
    body += f"<p>{html.escape(text)}</p>"
    if link is not None:
        body += f'<p><a id="continue" href="{html.escape(link[0], quote=True)}">{html.escape(link[1])}</a></p>'
    return HTMLResponse(
        body, status_code=status, headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
    )


def connect_routes(settings: Settings) -> list[Route]:
    """The two pages, for a server with upstreams of ``identity = "per_user"``."""

    async def connect(request: Request) -> Response:
        try:
            flow = await pending(settings, request.query_params.get("state", ""))
        except StoreError:
            return page(503, "Try again", "attp-server cannot reach its store right now; open the link again soon.")
        if flow is None:
            return page(404, "Link expired", "This link is unknown, used already or too old: run the tool again.")
        text = (
            f"This connects your own account at {flow['name']} ({flow['url']}) to attp-server, for "
            f"{flow['principal']}: their programs will call {flow['name']} as you. Continue only if you are "
            f"{flow['principal']}."
        )
        return page(200, f"Connect {flow['name']}", text, (str(flow["authorize"]), f"Continue to {flow['name']}"))

    async def callback(request: Request) -> Response:
        query = request.query_params
        state, code = query.get("state", ""), query.get("code")
        if query.get("error"):
            return page(400, "Not connected", f"The authorization server refused: {query['error'][:100]}.")
        if not code:
            return page(400, "Not connected", "The authorization server sent back no code.")
        try:
            name, principal = await finish_connect(settings, state, code, query.get("iss"))
        except PersonalError as exc:
            return page(400, "Not connected", str(exc))
        except StoreError:
            return page(503, "Try again", "attp-server cannot reach its store right now; run the tool again soon.")
        return page(200, "Connected", f"Your account at {name} is connected for {principal}. You can close this tab.")

    return [Route(CONNECT_PATH, connect, methods=["GET"]), Route(CALLBACK_PATH, callback, methods=["GET"])]

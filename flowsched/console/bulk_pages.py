"""Internal: the pages of the bulk actions (:mod:`flowsched.console.bulk`).

``GET /bulk/cancel?<the timers list's filters>``, ``GET /bulk/cancel-flow?flow=F`` and
``GET /bulk/requeue?handler=H`` (or ``kind=K``) preview on a page of their own how many
items the action would touch and ask to confirm there; the confirming ``POST`` (operator
role, CSRF) runs it in batches, streaming a line of progress after each, is recorded in the
audit once with every id, and ends with a link (and a refresh) back to the list the operator
came from (``back``, a path of this console's timers or dead-letters list).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from markupsafe import escape
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from flowsched.console.actions import read_form
from flowsched.console.bulk import Bulk, Progress, preview, run
from flowsched.console.pages import Pages
from flowsched.console.queries import BadQuery, Params, TimerQuery, check_text
from flowsched.port import ScheduleKind

__all__ = ["BulkPages"]

MARK = "<!--progress-->"
BACKS = ("/timers", "/dead")


class BulkPages:
    """Preview and run the three bulk actions."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages

    async def preview(self, request: Request) -> Response:
        """The count of what the action would touch, and the form that confirms it."""
        verb = _verb(request)
        bulk, fields, back = _parse(verb, request.query_params.multi_items())
        count = await preview(self.pages.source, bulk, self.pages.clock.now())
        return self.pages.render(
            request, "bulk.html", bulk=bulk, what=bulk.describe(), count=count,
            fields=fields, back=back, action=request.url.path.rsplit("/", 1)[-1],
        )  # fmt: skip

    async def confirm(self, request: Request) -> Response:
        """Run the action confirmed on its preview page, streaming progress."""
        form = await read_form(request)
        self.pages.guard.check_csrf(form, request.cookies)
        self.pages.guard.check_operator(self.pages.identity(request))
        items = [(k, v) for k, v in form.items() if k != "csrf" and k != "expect"]
        bulk, _, back = _parse(_verb(request), items)
        # The audit entry is written when the run ends (or fails): render the page first.
        html = self.pages.render(
            request, "bulk_run.html", what=bulk.describe(), back=back, expect=form.get("expect")
        ).body
        head, _, tail = bytes(html).decode().partition(MARK)
        return StreamingResponse(
            self._stream(request, bulk, head, tail, back), media_type="text/html"
        )

    async def _stream(
        self, request: Request, bulk: Bulk, head: str, tail: str, back: str
    ) -> AsyncIterator[str]:
        yield head
        progress = Progress()
        action = f"bulk_{bulk.verb}"
        try:
            async for progress in run(self.pages.source, bulk, self.pages.clock.now()):
                yield f'<li class="batch">{progress.done} done so far</li>\n'
        except Exception as exc:
            await self.pages.audit(
                request, action, False,
                f"failed after {progress.done}: {type(exc).__name__}: {exc}"[:300],
                ids=progress.ids, what=bulk.describe(),
            )  # fmt: skip
            yield f'<li class="problem" id="problem">failed after {progress.done}: '
            yield f"{escape(type(exc).__name__)}</li>\n"
        else:
            skipped = f", {progress.skipped} left as they were" if progress.skipped else ""
            message = f"{progress.done} done{skipped}"
            await self.pages.audit(request, action, True, message, ids=progress.ids,
                                   what=bulk.describe())  # fmt: skip
            yield f'<li class="done" id="bulk-done">{escape(message)}</li>\n'
        base = request.scope.get("root_path", "")
        link = escape(f"{base}{back}")
        yield f'</ol><p><a id="back" href="{link}">Back to the list</a></p>'
        yield f'<meta http-equiv="refresh" content="3;url={link}">'
        yield tail


def _verb(request: Request) -> str:
    return request.url.path.rstrip("/").rsplit("/", 1)[-1]


def _parse(verb: str, items: Sequence[tuple[str, str]]) -> tuple[Bulk, list[tuple[str, str]], str]:
    """The bulk action of a preview's query string or a confirming form: the action, the
    fields that name it again (hidden in the form), and where to go back to."""
    back_given = [value for name, value in items if name == "back"]
    rest = [(name, value) for name, value in items if name != "back"]
    back = _back(back_given[0] if back_given else None, verb)
    if verb == "cancel":
        query = TimerQuery.parse([(n, v) for n, v in rest if n not in ("after", "before")])
        return Bulk("cancel", query=query), query.link(after=None), back
    if verb == "cancel-flow":
        flow = Params(rest, ("flow",)).text("flow")
        if flow is None:
            raise BadQuery("flow: which flow instance? (/bulk/cancel-flow?flow=...)")
        return Bulk("cancel_flow", flow_id=flow), [("flow", flow)], back
    params = Params(rest, ("handler", "kind"))
    handler, kind = params.text("handler"), params.text("kind")
    if (handler is None) == (kind is None):
        raise BadQuery("handler or kind: give one (whose dead letters to requeue)")
    if kind is not None and kind.upper() not in {k.value for k in ScheduleKind}:
        raise BadQuery(f"kind: {kind[:40]!r} is not a kind")
    fields = [("handler", handler)] if handler else [("kind", str(kind).upper())]
    return Bulk("requeue", handler=handler, kind=kind.upper() if kind else None), fields, back


def _back(given: str | None, verb: str) -> str:
    """Where the operator goes afterwards: a path of this console's lists, nothing else."""
    default = "/dead" if verb == "requeue" else "/timers"
    if not given:
        return default
    text = check_text("back", given)
    path = text.split("?", 1)[0]
    if not path.startswith(BACKS) or "//" in text or "\\" in text or ":" in path:
        raise BadQuery("back: not a list of this console (/timers?... or /dead)")
    return text


def hidden(fields: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Form fields as (name, value) text pairs."""
    return [(str(k), str(v)) for k, v in fields.items()]

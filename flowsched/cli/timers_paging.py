"""Internal: paging for ``flowsched timers list`` and ``dead-letters`` (page number or after id).

``--page N`` is simple; ``--after ID`` (keyset paging) stays exact while timers fire and
vanish between two calls. Either way the footer says where the page is and how to go on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from flowsched.cli._output import console, fail
from flowsched.cli.timers_render import plain
from flowsched.mongo.inspection import Page, Pager

__all__ = ["AfterOption", "LimitOption", "PageOption", "Paging"]

MAX_LIMIT = 1000
EXIT_NOT_FOUND = 1

LimitOption = Annotated[
    int, typer.Option("--limit", metavar="N", help=f"Rows per page (1-{MAX_LIMIT}).")
]
PageOption = Annotated[
    int | None, typer.Option("--page", metavar="N", help="Page number, from 1 [1].")
]
AfterOption = Annotated[
    str | None,
    typer.Option("--after", metavar="ID", help="Continue after this id (stable paging)."),
]


@dataclass(frozen=True, slots=True)
class Paging:
    """Which page to show: ``number`` (from 1), or the rows after ``after`` when it is set."""

    limit: int
    number: int | None
    after: str | None

    @classmethod
    def of(cls, limit: int, page: int | None, after: str | None) -> Paging:
        """From the options; bad values exit 2 with one line."""
        if not 1 <= limit <= MAX_LIMIT:
            fail(f"--limit {limit}: must be between 1 and {MAX_LIMIT}")
        if page is not None and after is not None:
            fail("--page and --after: give one or the other")
        if page is not None and page < 1:
            fail(f"--page {page}: pages are numbered from 1")
        return cls(limit, None if after is not None else (page or 1), after)

    def fetch(self, pager: Pager, query: dict[str, Any]) -> Page:
        """The page; exit 1 if ``after`` names an id that is no longer stored."""
        if self.after is None:
            return pager.page(query, self.number or 1, self.limit)
        page = pager.after(query, self.after, self.limit)
        if page is None:
            fail(
                f"--after {self.after}: no such id any more (fired or removed?); use --page",
                EXIT_NOT_FOUND,
            )
        return page

    def footer(self, page: Page, noun: str) -> str:
        """``showing 51-100 of 120, next: --page 3`` (``--after ID`` when paging by id)."""
        if page.total == 0:
            return f"no {noun}"
        if not page.documents:
            where = f"page {self.number} is" if self.number is not None else "that id is"
            return f"{where} past the end: {page.total} {noun} in all"
        text = f"showing {page.first}-{page.last} of {page.total}"
        if not page.more:
            return text
        if self.number is not None:
            return f"{text}, next: --page {self.number + 1}"
        return f"{text}, next: --after {page.documents[-1].get('_id')}"

    def as_json(self, page: Page) -> dict[str, Any]:
        """Where the page is, for scripts: ``total``, ``first``, ``last``, how to go on."""
        shown = bool(page.documents)
        more = page.more and shown
        return {
            "total": page.total,
            "first": page.first if shown else None,
            "last": page.last if shown else None,
            "next_page": self.number + 1 if more and self.number is not None else None,
            "next_after": plain(page.documents[-1].get("_id")) if more else None,
        }

    def print(self, title: str, table: Table, page: Page, noun: str) -> None:
        """The title line, the table (if any row), and the footer."""
        out = console()
        out.print(Text(title))
        if page.documents:
            out.print(table)
        out.print(Text(self.footer(page, noun)))

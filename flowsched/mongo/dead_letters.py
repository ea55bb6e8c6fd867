"""Internal: moving an item that died to ``<name>_dead``, written once for both MongoDB paths
(the sweepers' :class:`~flowsched.mongo.claims.Claims` and the timer stores'
:class:`~flowsched.mongo.timer_claims.ClaimSteps`).

Two collections, no transaction. A first try reads the claim's fence before it writes: a
stale claim (its lease ended and another claim took the item, perhaps dead-lettering it
itself) writes nothing, so it never replaces or takes back another claim's letter. The
letter goes first, carrying its claim's token, then the item is removed under the fence: a
failure in between leaves both (the item is delivered again after its lease and dies again),
never neither. A removal that finds the fence gone on the first try (the form was cancelled,
by its own handler say, or replaced meanwhile) takes back this claim's letter only. On a
repeated try (the settle is retried after an error) the earlier try may have removed the
item, its reply lost: the letter is kept unless the item is stored.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flowsched.mongo.commands import Call, Steps
from flowsched.mongo.store import Doc, MongoCollections

__all__ = ["DeadLetters"]


class DeadLetters:
    """The procedure (:meth:`steps`), and the ``(id, token)`` of the removals sent for
    settles that have not completed (a retry of one is a repeated try)."""

    def __init__(self) -> None:
        self._tried: set[tuple[Any, str]] = set()

    def steps(self, store: MongoCollections, letter: Doc, token: str, fence: Doc) -> Steps[bool]:
        """Dead-letter the item of ``letter`` (a dead-letter document) held by the claim
        ``token`` under ``fence``; False when that claim no longer holds it."""
        item_id, generation = letter["_id"], letter["generation"]
        key = (item_id, token)
        repeated = key in self._tried
        if not repeated and (yield Call("items", "find_one", (fence, {"_id": 1}))) is None:
            return False
        self._tried.add(key)
        yield from store.put_dead_letters_steps([{**letter, "claim_token": token}])
        if (yield Call("items", "delete_one", (fence,))).deleted_count:
            return True
        if repeated and not (yield from store.exists_steps(item_id)):
            return True
        yield from store.remove_dead_letter_steps(item_id, generation, token)
        return False

    def settled(self, keys: Iterable[tuple[Any, str]]) -> None:
        """The settle call of these ``(id, token)`` completed: a later one is a first try."""
        self._tried.difference_update(keys)

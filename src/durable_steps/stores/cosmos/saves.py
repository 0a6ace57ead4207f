"""A save of the Cosmos DB stores as a program (``programs``). A save (``plan``)
creates its segments, then -- when the head will expire -- its entry in the expiry
index (``expiry``), then writes the head -- the commit -- with ``no_response`` (the
etag comes from the answer's headers), then deletes what a fold superseded. A save
that creates a run and needs segments reads the head first: a run that exists makes
it a ``ConflictError`` with nothing written. A segment that fails fails the save,
which then says nothing was saved (the head is untouched); a save whose segments took
longer than ``SAVE_LIMIT`` gives up the same way (see ``removal``). When the head's
answer is not seen (the connection dropped after the request went out, a timeout, a
5xx, or a 409/412 that may be the SDK's own retry meeting the write it sent first),
the program reads the head back and settles the outcome by the save's nonce:

- the stored head carries this save's nonce: the save landed; it returns normally;
- it is the version the save meant to replace (or, for a create, there is none): it
  has not landed yet -- but the request may be on its way still (a head write delayed
  6.5 s landed 2.5 s after a timeout). So it is sent again, the same write on the
  same condition: landing, it fences the first out (which then finds a newer version
  and is refused); meeting the first (412/409), the read-back finds this save's
  nonce. Only if the second is not confirmed either, and the run read back is still
  the version it replaces, is it a ``StoreError`` saying the save has not landed yet
  and may still land (load before retrying);
- it is another writer's (or gone): ``ConflictError``, saying it was checked -- and a
  save that replaces deletes the segments it wrote: its head, conditional on a
  version that is gone, can never land;
- the read fails too: a ``StoreError`` saying the outcome is unknown (reload first).

It never reports "nothing was written" about a write that landed or may still land.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ...seam.checkpoint import Checkpoint
from ...seam.encoded import room, sealed
from ...seam.errors import ConflictError
from ...seam.metering import wrote
from . import expiry, segments
from .items import Write
from .plan import SavePlan, prepare
from .programs import OPEN, PATCH_REFUSED, QUERY, CosmosPrograms, Program, SdkCall, _read, log
from .sdk import (
    AzureError,
    CosmosHttpResponseError,
    MatchConditions,
    conflict,
    lost_create,
    may_have_landed,
    missing_item,
    not_landed_yet,
    segment_failed,
    status_of,
    too_slow,
    unknown_outcome,
    write_error,
)

SAVE_LIMIT = 600.0
"""A save commits its head at most this long (seconds, by the writer's monotonic
clock) after it began writing its segments; a slower one gives up, nothing saved. So
a segment older than ``ORPHAN_AGE`` that its head does not reach is no save's in
flight, whatever the clocks of the writer and of ``prune`` say (within 50 minutes)."""


class Saves(CosmosPrograms):
    """``save`` as a program, and the commit of a head that a head-only save shares."""

    def _save(self, checkpoint: Checkpoint) -> Program[Checkpoint]:
        # before any I/O: the values as stored (``seam.encoded``), checked and measured
        plain, codec = checkpoint, self.codec
        checkpoint = sealed(codec, checkpoint, self.max_state_bytes)
        prepared = prepare(self._items, checkpoint, room(codec, self.max_state_bytes))
        if self.partition_key is None:
            yield OPEN
        saving = self.layout.plan(self._items, prepared)
        run_id = checkpoint.run_id
        started = None
        if saving.segments:
            if checkpoint.etag is None and (yield from self._head(run_id)) is not None:
                # A create whose run exists loses: it writes no segments to say so.
                raise lost_create(run_id)
            started = time.monotonic()
            yield from self._put_segments(saving)
            if time.monotonic() - started > SAVE_LIMIT:
                raise too_slow(run_id, self._where, SAVE_LIMIT)

        def whole() -> Program[SavePlan]:
            return self.layout.plan(self._items, prepared, patch=False)
            yield  # (a program: it could read, as a head-only save's does)

        yield from self._note_expiry(saving)
        try:
            saving, etag = yield from self._commit(saving, whole, started)
        except ConflictError:
            if saving.segments and checkpoint.etag is not None:
                # Its head, conditional on a version that is gone, can never land now:
                # its segments are no save's -- unless its head did land, its answer
                # lost, and another writer saved on top of it: the head now there
                # reaches them then (``_unreached``). (A create's could land, if the
                # run were deleted meanwhile: those are left for prune.)
                yield from self._delete_segments(
                    run_id, (yield from self._unreached(run_id, _ids(saving))), "unused"
                )
            raise
        if saving.cleanup is not None:
            yield from self._cleanup(run_id, *saving.cleanup)
        if saving.trim is not None and saving.known.chain is not None:  # keep_last
            yield from self._trim(run_id, saving.known.chain, saving.trim)
        stored = self._confirmed(saving, etag)
        return replace(
            plain, etag=stored.etag, updated_at=stored.updated_at, started_at=stored.started_at
        )

    def _note_expiry(self, saving: SavePlan) -> Program[None]:
        """A head that will expire (a ttl) gets its entry in the expiry index first
        (``expiry``): a crash before the head leaves an entry, never an expiring run
        without one. Its failure fails the save, nothing committed."""
        ttl = saving.head.body.get("ttl")
        if not self.layout.segmented or not isinstance(ttl, int | float):  # no index
            return
        try:
            yield expiry.note_call(saving.head.run_id, ttl)
        except AzureError as exc:
            raise segment_failed(exc, self._where, saving.head.run_id) from exc

    def _unreached(self, run_id: str, own: list[dict[str, Any]]) -> Program[list[dict[str, Any]]]:
        """Those of ``own`` (a losing save's segments) that the run's head, read now,
        does not reach along its chain and history (``segments.history_chain``); none
        when that cannot be read (prune decides later)."""
        try:
            head = yield _read(run_id)
            chain = segments.chain_of(head)
            found = [] if chain is None else (yield SdkCall(QUERY, segments.history_links(run_id)))
        except (AzureError, TypeError, ValueError) as exc:
            if isinstance(exc, AzureError) and missing_item(exc):
                return own
            # A warning: unsure, nothing is deleted (prune decides later); no call runs again.
            log.warning("run %r: could not tell whether its segments are needed: %s", run_id, exc)
            return []
        reached = (
            set() if chain is None else {v.get("seg") for v in segments.history_chain(chain, found)}
        )
        return [s for s in own if s["id"][1:].split(".")[0] not in reached]  # "~SEG[.PART]"

    def _commit(
        self,
        saving: SavePlan,
        whole: Callable[[], Program[SavePlan]],
        started: float | None = None,
    ) -> Program[tuple[SavePlan, str]]:
        """Write the head of ``saving``: the commit of a save (``started``: when it began
        writing its segments, by the monotonic clock). A service that refuses a partial
        update gets the whole item (``whole()``: the plan without one) at once. An
        answer not seen is settled by reading the head back (``_settle``). Returns the
        plan that was written and the new etag."""
        write = saving.head
        try:
            try:
                answer = yield _write_call(write)
            except CosmosHttpResponseError as exc:
                if write.operations is None or exc.status_code not in PATCH_REFUSED:
                    raise
                self._items.patch = False
                log.info(
                    "Cosmos DB at %s refused a partial update (%s); saving whole items from now on",
                    self._where,
                    exc.status_code,
                )
                saving = yield from whole()
                write = saving.head
                answer = yield _write_call(write)
            return saving, _etag_of(answer)
        except AzureError as exc:
            etag = yield from self._settle(write, exc)
            if etag is not None:
                return saving, etag
            if started is not None and time.monotonic() - started > SAVE_LIMIT:
                raise not_landed_yet(exc, self._where, write.run_id, again=False) from exc
        # Read back, it has not landed yet, but it may still: send it again, the same
        # write on the same condition. Landing, it fences the first out (which then
        # finds a newer version); if the first lands before it, it meets it (412/409),
        # and read back, that one is this save's.
        try:
            answer = yield _write_call(write)
            log.info("run %r: a save sent again after its answer was lost landed", write.run_id)
            return saving, _etag_of(answer)
        except AzureError as exc:
            etag = yield from self._settle(write, exc)
            if etag is None:
                raise not_landed_yet(exc, self._where, write.run_id, again=True) from exc
            return saving, etag

    def _settle(self, write: Write, exc: AzureError) -> Program[str | None]:
        """The outcome of a write whose answer was not seen (``exc``), from the head read
        back: its etag if the head carries this save's nonce; None if it is still the
        version the save replaces (or, for a create, none): not landed yet. A write
        that cannot have landed, another writer's version, a read that fails too: the
        error that says so."""
        if not may_have_landed(exc):
            raise write_error(exc, self._where, write.run_id, write.etag) from exc
        try:
            item = yield _read(write.run_id)
        except AzureError as again:
            if not missing_item(again):
                raise unknown_outcome(exc, again, self._where, write.run_id) from exc
            item = None
        if item is not None and item.get("nonce") == write.nonce:
            log.info(
                "run %r: Cosmos DB did not confirm a save (%s); read back, it had landed",
                write.run_id,
                type(exc).__name__,
            )
            return str(item["_etag"])
        if status_of(exc) not in (409, 412) and (
            (item is None and write.etag is None)
            or (item is not None and item.get("_etag") == write.etag)
        ):
            return None
        raise conflict(write.run_id, write.etag, missing=item is None, checked=True) from exc

    def _put_segments(self, saving: SavePlan) -> Program[None]:
        """Create a save's segments. One that fails fails the save, nothing committed."""
        results = yield [
            SdkCall("create_item", {"body": body, "no_response": True})
            for body, _ in saving.segments
        ]
        for result in results:
            # 409: an item of this random id exists: this save's own write, sent again.
            if isinstance(result, AzureError) and status_of(result) != 409:
                run_id = saving.head.run_id
                raise segment_failed(result, self._where, run_id) from result

    def _cleanup(self, run_id: str, fold: int, gen: str) -> Program[None]:
        """After a fold: delete the segments it superseded. A failure only leaves them
        for the next fold (or ``prune``)."""
        try:
            found = yield SdkCall(QUERY, segments.superseded(run_id, fold, gen))
        except AzureError as exc:
            # A warning: what is not trimmed is only kept longer; no call runs again.
            log.warning("run %r: could not list superseded segments: %s", run_id, exc)
            return
        yield from self._delete_segments(run_id, found)

    def _trim(self, run_id: str, chain: segments.Chain, step: int) -> Program[None]:
        """After a fold with ``keep_last``: delete the kept generations that only the
        history before ``step`` needs. A failure leaves them for the next fold."""
        try:
            found = yield SdkCall(QUERY, segments.history_links(run_id))
        except AzureError as exc:
            # A warning: history not trimmed is only kept longer; no call runs again.
            log.warning("run %r: could not list its history to trim it: %s", run_id, exc)
            return
        yield from self._delete_segments(run_id, segments.older_than(chain, found, step), "old")

    def _confirmed(self, saving: SavePlan, etag: str) -> Checkpoint:
        write = saving.head
        self._items.remember(write.run_id, replace(saving.known, etag=etag))
        wrote(saving.sent)
        return replace(
            write.checkpoint,
            etag=etag,
            updated_at=write.body["updated_at"],
            started_at=write.body["started_at"],
        )


def _write_call(write: Write) -> SdkCall:
    cp = write.checkpoint
    if cp.etag is None:
        return SdkCall("create_item", {"body": write.body, "no_response": True})
    condition = {"etag": cp.etag, "match_condition": MatchConditions.IfNotModified}
    if write.operations is not None:
        return SdkCall(
            "patch_item",
            {
                "item": cp.run_id,
                "partition_key": cp.run_id,
                "patch_operations": write.operations,
                "no_response": True,
                **condition,
            },
        )
    return SdkCall(
        "replace_item", {"item": cp.run_id, "body": write.body, "no_response": True, **condition}
    )


def _etag_of(answer: Any) -> str:
    etag = answer.get_response_headers().get("etag") or answer.get("_etag")
    if not etag:  # an answer without the new etag: see what was stored
        raise AzureError("the answer to the save carried no etag")
    return str(etag)


def _ids(saving: SavePlan) -> list[dict[str, Any]]:
    return [{"id": body["id"]} for body, _ in saving.segments]

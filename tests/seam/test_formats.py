"""Earlier stored formats are upgraded in one place (``seam.formats``), as pure functions:
the rest of the code reads schema 4 only."""

from __future__ import annotations

import pytest

from durable_steps.seam import formats
from durable_steps.seam.document import from_document


def test_earlier_schemas_become_schema_4_and_today_s_passes_untouched() -> None:
    """Schema 1's ``done`` becomes a status, 2 and 3 are relabelled, an old error name
    becomes the one it is imported by; a schema 4 document is returned as it is."""
    one = {"schema": 1, "done": True, "state": {}}
    assert formats.upgrade(one) == {"schema": 4, "done": True, "state": {}, "status": "completed"}
    assert one["schema"] == 1  # the input is not changed
    assert formats.upgrade({"schema": 1})["status"] == "running"
    two = {"schema": 2, "status": "failed", "error": {"type": "durable_steps._errors.StoreError"}}
    assert formats.upgrade(two) == {
        "schema": 4,
        "status": "failed",
        "error": {"type": "durable_steps.StoreError"},
    }
    today = {"schema": 4, "status": "running", "error": {"type": "ValueError"}}
    assert formats.upgrade(today) is today
    with pytest.raises(ValueError, match="done"):
        formats.upgrade({"schema": 1, "done": "yes"})


def test_a_whole_document_file_is_read_as_a_document() -> None:
    """0.1's run file (one JSON document) is told from a log by its first byte, and
    gives its document and etag; from_document then reads it as schema 4."""
    data = b'{"schema": 1, "etag": "e1", "run_id": "r", "step": -1, "steps": [], "state": {}}'
    assert formats.is_whole_document(data) and not formats.is_whole_document(b"\x1eDSJ1 ")
    doc, etag = formats.read_whole(data, "r", "here")
    cp = from_document(doc, "r", etag, "here")
    assert (cp.status, cp.etag, cp.step) == ("running", "e1", -1)


def test_an_item_of_the_id_layout_is_read_as_its_document() -> None:
    """An item of a Cosmos DB container of the earlier /id layout: the layout's fields
    and the service's go, the document stays (its schema upgraded by from_document); an
    item that points to segments is not of that layout, and is refused."""
    item = {
        "schema": 1,
        "run_id": "r",
        "step": 0,
        "steps": ["a"],
        "done": True,
        "state": {"a": 1},
        "id": "r",
        "nonce": "n",
        "size": 120,
        "ttl": 60,
        "_etag": "e",
        "_ts": 1,
    }
    doc = formats.id_layout.document_of(item)
    assert doc == {
        "schema": 1,
        "run_id": "r",
        "step": 0,
        "steps": ["a"],
        "done": True,
        "state": {"a": 1},
    }
    cp = from_document(doc, "r", "e", "here")
    assert (cp.status, cp.state) == ("completed", {"a": 1})
    with pytest.raises(ValueError, match="/run layout's 'gen'"):
        formats.id_layout.document_of({**item, "gen": "g"})

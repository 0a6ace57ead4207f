"""Documents of schemas 1 to 3 as schema 4 (``seam.document`` reads schema 4 only).

- 1: the state, the step names and ``done``: no status (``done`` is ``completed``,
  else ``running``), no lease, no workflow;
- 2: + status, workflow, lease, signals, the last error, ``first_attempt``, ``trace``;
- 3: + the running step's journal (``calls``), ``wake_at``, ``cancel_reason``.

Fields a schema did not have are absent, which schema 4 reads as none. Schema 4 adds a
journal record's ``task``; records of schema 3 have none (the step's own scope).

A recorded error's type ``durable_steps._errors.X`` (the module earlier versions named
their errors by) is ``durable_steps.X``, the name it is imported by, whatever the schema.
"""

from __future__ import annotations

from typing import Any

EARLIER = (1, 2, 3)
"""The schemas earlier versions wrote; 4 is today's (``document.SCHEMA``)."""
TODAY = 4

_OLD_ERRORS = "durable_steps._errors."


def upgrade(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (a document of any known schema) as schema 4: ``doc`` itself when it is
    one already and names no old error; else a new dict. ValueError: a field of the old
    schema has the wrong type."""
    schema = doc.get("schema")
    error = _error_of(doc.get("error"))
    if schema == TODAY and error is doc.get("error"):
        return doc
    out = {**doc, "schema": TODAY} if schema in EARLIER else dict(doc)
    if error is not doc.get("error"):
        out["error"] = error
    if schema == 1:
        done = doc.get("done", False)
        if not isinstance(done, bool):
            raise ValueError("done has the wrong type")
        out["status"] = "completed" if done else "running"
    return out


def _error_of(error: object) -> object:
    kind = error.get("type") if isinstance(error, dict) else None
    if not isinstance(kind, str) or not kind.startswith(_OLD_ERRORS):
        return error
    assert isinstance(error, dict)
    return {**error, "type": "durable_steps." + kind.removeprefix(_OLD_ERRORS)}

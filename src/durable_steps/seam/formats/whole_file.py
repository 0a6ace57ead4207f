"""A FileStore run file of version 0.1: one whole JSON document, the etag one of its
members -- before run files became logs of framed records (``stores.file.runfile``),
whose first byte is 0x1E (an ASCII record separator no JSON document starts with)."""

from __future__ import annotations

import json
from typing import Any

from ..errors import corrupt_error

RS = b"\x1e"


def is_whole_document(data: bytes) -> bool:
    """Whether a run file's bytes are an earlier version's whole document (not a log)."""
    return data[:1] != RS


def read_whole(data: bytes, run_id: str, where: str) -> tuple[Any, str | None]:
    """The document and its etag (None when it has none: ``from_document`` refuses it)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:  # as ``document.loads`` says it
        why = "nested too deep to read" if isinstance(exc, RecursionError) else f"not JSON ({exc})"
        raise corrupt_error(run_id, where, why) from None
    etag = doc.get("etag") if isinstance(doc, dict) else None
    return doc, etag if isinstance(etag, str) else None

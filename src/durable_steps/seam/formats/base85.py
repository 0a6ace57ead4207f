"""Envelopes of the first codec (``$ds: 1``): their bytes written as base85, which is
pure Python and about thirty times slower than the base64 written since
(``seam.codec``). Still read, never written."""

from __future__ import annotations

import base64

VERSION = 1
"""The ``$ds`` of such an envelope."""


def envelope_bytes(text: str) -> bytes:
    """The bytes of a base85 field (``ValueError`` when it is not base85)."""
    return base64.b85decode(text)

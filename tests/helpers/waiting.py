"""Waiting for a condition, not for luck."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(condition: Callable[[], Any], what: str, timeout: float = 90) -> Any:
    """Poll ``condition`` until it is true; the timeout is a bound for a hung test, not a
    measurement (a loaded machine only makes this slower, never wrong)."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)
    return value

"""Environment variables read one at a time: the checks and messages every backend shares.

Each function takes the environment as a mapping and returns what one variable (or a
small family) means, or raises a ``ConfigurationError`` naming the variable and the
accepted values. A message never repeats a value that may hold a key (``shown``): a
connection string pasted into the wrong variable must not reach a log. What reads
these -- ``config`` (which store) and each backend's module (how to open it) -- is
the only code that knows the names of the variables.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from ..seam.errors import ConfigurationError
from ..seam.rules import MAX_STATE_BYTES

TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
CREATE_IF_MISSING = (
    "DURABLE_CREATE_IF_MISSING",
    True,
    "true (default: a missing store is created, with a warning) or false (a missing store "
    "is an error)",
)
log = logging.getLogger("durable_steps")
_KEYLIKE = re.compile(r"[A-Za-z0-9+/]{32,}={0,2}")


def shown(value: str) -> str:
    """``value`` quoted for a message, unless it may hold a secret."""
    if "accountkey" in value.lower() or _KEYLIKE.search(value) or len(value) > 100:
        return "(a value not repeated here: it may hold a key)"
    return repr(value)


def flag(env: Mapping[str, str], spec: tuple[str, bool, str]) -> bool:
    """The boolean variable ``spec`` describes: ``(name, default, accepted values)``."""
    name, default, accepted = spec
    value = env.get(name, "").strip().lower()
    if not value:
        return default
    if value not in TRUE + FALSE:
        raise ConfigurationError(
            f"{name}={shown(env[name])} is not a boolean; use {accepted} "
            f"(also accepted: {'/'.join(TRUE)} and {'/'.join(FALSE)})",
            variable=name,
        )
    return value in TRUE


def max_state_bytes(env: Mapping[str, str]) -> int | None:
    """``DURABLE_MAX_STATE_BYTES``: a positive number of bytes (None: the default)."""
    value = env.get("DURABLE_MAX_STATE_BYTES", "").strip().replace("_", "")
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ConfigurationError(
            f"DURABLE_MAX_STATE_BYTES={shown(env['DURABLE_MAX_STATE_BYTES'])} is not a size; "
            f"use a positive whole number of bytes, e.g. 134217728 (unset means "
            f"{MAX_STATE_BYTES}, 64 MiB), the same limit in every store",
            variable="DURABLE_MAX_STATE_BYTES",
        )
    return int(value)


def retention(env: Mapping[str, str]) -> dict[str, Any]:
    """``DURABLE_HISTORY`` (steps or none; unset: the store's default),
    ``DURABLE_HISTORY_KEEP_LAST`` (N) and ``DURABLE_FINISHED_TTL`` (seconds after a run
    ended when it is deleted) as store arguments; only those that are set."""
    found: dict[str, Any] = {}
    history = env.get("DURABLE_HISTORY", "").strip().lower()
    if history:
        if history not in ("steps", "none"):
            raise ConfigurationError(
                f"DURABLE_HISTORY={shown(env['DURABLE_HISTORY'])} is not a history setting; "
                "use steps (every completed step is kept) or none (only the latest checkpoint)",
                variable="DURABLE_HISTORY",
            )
        found["history"] = history
    for name, key, what in (
        ("DURABLE_HISTORY_KEEP_LAST", "keep_last", "a number of completed steps"),
        ("DURABLE_FINISHED_TTL", "finished_ttl", "a number of seconds"),
    ):
        value = env.get(name, "").strip().replace("_", "")
        if not value:
            continue
        if not value.isdigit() or int(value) < 1:
            raise ConfigurationError(
                f"{name}={shown(env[name])} is not {what}; use a whole number from 1",
                variable=name,
            )
        found[key] = int(value)
    return found

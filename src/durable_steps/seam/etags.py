"""Etags: the version token a store gives every save, unique without a system call.

A random 64-bit prefix drawn once per process -- again after a fork (parent and
child would otherwise count the same numbers after the same prefix) and once
2**32 were counted -- and a counter: 24 hex digits, what a journal's TAIL holds.
A prefix and its counter are read together, so a thread never pairs a new prefix
with an old count.
"""

from __future__ import annotations

import itertools
import os
import secrets
import threading


class _Etags:
    """New etags (see the top)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.current = (secrets.token_hex(8), itertools.count())

    def new(self) -> str:
        while True:
            prefix, counter = self.current
            n = next(counter)  # atomic: itertools.count is one C call
            if n <= 0xFFFFFFFF:
                return f"{prefix}{n:08x}"
            with self.lock:
                if self.current[1] is counter:
                    self.reset()

    def after_fork(self) -> None:
        self.lock = threading.Lock()
        self.reset()


_ETAGS = _Etags()
new_etag = _ETAGS.new
if hasattr(os, "register_at_fork"):  # a child must not repeat its parent's etags
    os.register_at_fork(after_in_child=_ETAGS.after_fork)

"""The codec of the plugin's stores: ``--durable-codec`` for every store it makes, and the
``+aes`` backends (``file+aes``, ``memory+aes``, ``cosmos-local+aes``...: the backend
with values compressed and encrypted), so the one contract suite proves a codec changes
nothing a store promises. The key is random per test session: what a test writes with it
is gone with the test."""

from __future__ import annotations

import base64
import functools
import os

import pytest

from ..seam.codec import ValueCodec, from_env

ENCRYPTED = "+aes"
"""The suffix of a backend name that turns encryption (and compression) on."""
CODECS = ("none", "zstd", "gzip", "aes256gcm", "zstd,aes256gcm")


@functools.cache
def _session_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def make(name: str) -> ValueCodec | None:
    """The codec ``name`` (as ``DURABLE_CODEC`` names one) with the session's key, and a
    threshold low enough that compression is exercised by small test values too."""
    env = {
        "DURABLE_CODEC": name,
        "DURABLE_KEY": _session_key(),
        "DURABLE_KEY_ID": "test-session",
        "DURABLE_COMPRESS_MIN": "64",
    }
    return from_env(env)


def split(backend: str) -> tuple[str, bool]:
    """``file+aes`` -> ``("file", True)``."""
    return backend.removesuffix(ENCRYPTED), backend.endswith(ENCRYPTED)


def codec_for(config: pytest.Config, encrypted: bool) -> ValueCodec | None:
    """The codec of a store the plugin makes: the ``+aes`` backends' (zstd and AES-256-GCM),
    else ``--durable-codec``'s."""
    if encrypted:
        return make("zstd,aes256gcm")
    return make(str(config.getoption("--durable-codec") or "none"))

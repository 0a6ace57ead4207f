"""The codec on every backend: values written with encryption on never reach the
backend's bytes in the clear (state values, list items, call results), whoever wrote
the backend -- the library encodes before a store sees a value (``seam.coded``) -- and
a key other than the one a run was written with, under the same key id, is a
``CodecError`` naming the key id and the run, never "damaged"."""

from __future__ import annotations

import base64
import os
from typing import Any

import pytest

import durable_steps as ds
from durable_steps import Step
from durable_steps.seam.codec import from_env

from . import fixtures
from .fixtures import Backend

backend, loop, run_id = fixtures.backend, fixtures.loop, fixtures.run_id  # its fixtures
pytest_generate_tests = fixtures.parametrize_backend  # (not in __all__: a project has its own)

__all__ = [
    "test_a_secret_written_with_encryption_never_reaches_the_backend",
    "test_a_wrong_key_under_the_same_id_is_a_codec_error_naming_it_and_the_run",
]


def _codec(key: bytes) -> Any:
    """The codec ``DURABLE_CODEC=zstd,aes256gcm`` makes with ``DURABLE_KEY`` = ``key``
    (its id the default, ``k1``), compressing from 64 bytes."""
    env = {
        "DURABLE_CODEC": "zstd,aes256gcm",
        "DURABLE_KEY": base64.b64encode(key).decode(),
        "DURABLE_COMPRESS_MIN": "64",
    }
    return from_env(env)


class _Using:
    """The backend's store with ``codec``, its own codec put back afterwards."""

    def __init__(self, backend: Backend, codec: Any) -> None:
        self.store, self.codec = backend.store, codec

    def __enter__(self) -> Any:
        self.before, self.store.codec = self.store.codec, self.codec
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.store.codec = self.before


def test_a_secret_written_with_encryption_never_reaches_the_backend(
    backend: Backend, run_id: str
) -> None:
    """With encryption on, a secret in a state value, in a list's items and in a durable
    call's result is nowhere in the backend's bytes, and loads back as it was."""
    secret = f"TOPSECRET-{run_id}"

    def ask(state: Any) -> dict[str, Any]:
        answer = ds.call("model", lambda: {"text": secret})
        return {"answer": answer["text"], "notes": [*state["notes"], secret]}

    steps = [Step("a", lambda s: {"secret": secret, "notes": [secret]}), Step("b", ask)]
    with _Using(backend, _codec(os.urandom(32))) as store:
        final = ds.run(run_id, steps, store)
        loaded = store.load(run_id)
    assert final == {"secret": secret, "notes": [secret, secret], "answer": secret}
    assert loaded is not None and loaded.state == final
    raw = backend.raw_bytes()
    assert run_id.encode() in raw  # the hook shows what the backend holds
    assert secret.encode() not in raw, "a secret reached the backend's bytes in the clear"


def test_a_wrong_key_under_the_same_id_is_a_codec_error_naming_it_and_the_run(
    backend: Backend, run_id: str
) -> None:
    """Another key configured under the id a run was written with (``DURABLE_KEY_ID`` at
    its default ``k1``, another ``DURABLE_KEY``): loading is a CodecError naming ``k1``
    and the run, advising no deletion; nothing runs, and the right key still reads it."""
    key = os.urandom(32)
    steps = [Step("a", lambda s: {"secret": "s" * 100}), Step("b", lambda s: {"b": 1})]
    with _Using(backend, _codec(key)) as store, pytest.raises(ValueError, match="boom"):
        ds.run(run_id, [steps[0], Step("b", _boom)], store)
    ran: list[str] = []
    with _Using(backend, _codec(os.urandom(32))) as store:
        with pytest.raises(ds.CodecError) as err:
            store.load(run_id)
        with pytest.raises(ds.CodecError):
            ds.run(run_id, [steps[0], Step("b", lambda s: ran.append("b"))], store)
    assert (err.value.key_id, err.value.run_id) == ("k1", run_id)
    message = str(err.value)
    assert "'k1'" in message and run_id in message and "delete" not in message
    assert ran == []
    with _Using(backend, _codec(key)) as store:
        assert ds.run(run_id, steps, store) == {"secret": "s" * 100, "b": 1}


def _boom(state: Any) -> None:
    raise ValueError("boom")

"""The value codec on its own: what an encoded value looks like, that it opens only in its
place and with its key, that keys rotate, and each error it raises. (Every store with a
codec on runs the contract suite too: tests/stores.)"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.seam import codec as c


def key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


TEXT = {"answer": "the lease expires after sixty seconds " * 100}


def test_an_encrypted_value_opens_in_its_place_with_its_key() -> None:
    """AES-256-GCM per value: the envelope names its key id and hides the value; it opens
    with that key in the same run and place, and comes back equal."""
    codec = c.ValueCodec(keys=c.Keyring("k1", {"k1": key()}))
    where = c.place("run-1", "state:answer")
    stored = codec.encode(TEXT, dumps(TEXT), where)
    assert c.is_envelope(stored) and stored["k"] == "k1"
    assert "lease" not in json.dumps(stored)
    assert codec.decode(stored, where, "run-1") == TEXT


@pytest.mark.parametrize("elsewhere", [("run-2", "state:answer"), ("run-1", "state:other")])
def test_a_value_copied_to_another_run_or_key_does_not_open(elsewhere: tuple[str, str]) -> None:
    """The run id and the value's place are authenticated: moved, it is reported as
    damaged (CorruptCheckpointError), never returned."""
    codec = c.ValueCodec(keys=c.Keyring("k1", {"k1": key()}))
    stored = codec.encode(TEXT, dumps(TEXT), c.place("run-1", "state:answer"))
    with pytest.raises(ds.CorruptCheckpointError, match="does not authenticate"):
        codec.decode(stored, c.place(*elsewhere), elsewhere[0])


def test_tampered_ciphertext_is_corrupt() -> None:
    codec = c.ValueCodec(keys=c.Keyring("k1", {"k1": key()}))
    where = c.place("r", "state:x")
    stored = codec.encode(TEXT, dumps(TEXT), where)
    raw = bytearray(base64.b64decode(stored["v"]))
    raw[5] ^= 1
    with pytest.raises(ds.CorruptCheckpointError):
        codec.decode({**stored, "v": base64.b64encode(bytes(raw)).decode()}, where, "r")
    with pytest.raises(ds.CorruptCheckpointError, match="'v' is not base64"):
        codec.decode({**stored, "v": stored["v"][:-1] + "~"}, where, "r")


@pytest.mark.parametrize(
    ("compression", "keys"),
    [(None, True), (c.Compression(threshold=100), False), (c.Compression(threshold=100), True)],
)
def test_envelopes_of_the_first_codec_in_base85_still_open(
    compression: c.Compression | None, keys: bool
) -> None:
    """Values are written in base64 (``$ds`` 2); those the first codec wrote in base85
    (``$ds`` 1) still open, encrypted or compressed, and a damaged one is corrupt."""
    ring = c.Keyring("k1", {"k1": key()}) if keys else None
    codec = c.ValueCodec(compression=compression, keys=ring)
    where = c.place("r", "state:x")
    stored = codec.encode(TEXT, dumps(TEXT), where)
    assert stored[c.MARK] == c.BASE64
    old = {
        **stored,
        c.MARK: c.BASE85,
        **{
            f: base64.b85encode(base64.b64decode(stored[f])).decode()
            for f in ("n", "v")
            if f in stored
        },
    }
    assert c.is_envelope(old) and old["v"] != stored["v"]
    assert codec.decode(old, where, "r") == TEXT
    with pytest.raises(ds.CorruptCheckpointError, match="'v' is not base85"):
        codec.decode({**old, "v": old["v"][:-1] + '"'}, where, "r")


def test_a_missing_key_is_a_codec_error_naming_the_key_and_the_run() -> None:
    old = c.ValueCodec(keys=c.Keyring("k1", {"k1": key()}))
    stored = old.encode(TEXT, dumps(TEXT), c.place("r", "state:x"))
    new = c.ValueCodec(keys=c.Keyring("k2", {"k2": key()}))
    with pytest.raises(ds.CodecError, match="'k1'") as err:
        new.decode(stored, c.place("r", "state:x"), "r")
    assert (err.value.run_id, err.value.key_id) == ("r", "k1")  # type: ignore[attr-defined]


def test_rotated_keys_read_old_values_and_write_with_the_current_one() -> None:
    """A keyring with the old key kept for reading: old values open, new ones use the
    current key id; a callable keyring (Key Vault) works alike."""
    k1, k2 = key(), key()
    old = c.ValueCodec(keys=c.Keyring("k1", {"k1": k1}))
    where = c.place("r", "state:x")
    before = old.encode(TEXT, dumps(TEXT), where)
    asked: list[str] = []

    def vault(key_id: str) -> bytes | None:
        asked.append(key_id)
        return {"k1": base64.b64decode(k1), "k2": base64.b64decode(k2)}.get(key_id)

    rotated = c.ValueCodec(keys=c.Keyring("k2", vault))
    assert rotated.decode(before, where, "r") == TEXT
    assert rotated.encode(TEXT, dumps(TEXT), where)["k"] == "k2"
    assert sorted(set(asked)) == ["k1", "k2"]


def test_compression_keeps_small_values_plain_and_shrinks_text() -> None:
    """Below the threshold a value is stored as it is; text above it is compressed (zstd
    here), and smaller than its JSON."""
    codec = c.ValueCodec(compression=c.Compression(threshold=100))
    where = c.place("r", "state:x")
    assert codec.encode({"n": 1}, dumps({"n": 1}), where) == {"n": 1}
    stored = codec.encode(TEXT, dumps(TEXT), where)
    assert stored["z"] == "zstd" and len(dumps(stored)) < len(dumps(TEXT)) / 5
    assert codec.decode(stored, where, "r") == TEXT


def test_gzip_is_used_where_zstandard_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(__import__("sys").modules, "zstandard", None)
    codec = c.ValueCodec(compression=c.Compression(threshold=100))
    stored = codec.encode(TEXT, dumps(TEXT), c.place("r", "x"))
    assert stored["z"] == "gzip"
    assert codec.decode(stored, c.place("r", "x"), "r") == TEXT


def test_plain_values_pass_through_decode_so_mixed_runs_load() -> None:
    codec = c.ValueCodec(keys=c.Keyring("k1", {"k1": key()}))
    assert codec.decode({"plain": [1, 2]}, c.place("r", "x"), "r") == {"plain": [1, 2]}


def test_a_plain_value_shaped_like_an_envelope_is_refused() -> None:
    with pytest.raises(ds.InvalidStateError, match=r"'\$ds'"):
        c.refuse_envelope({"$ds": 1, "v": "x"}, "r", "state")
    with pytest.raises(ds.InvalidStateError, match=r"'\$ds'"):
        c.refuse_envelope({"$ds": 2, "v": "x"}, "r", "state")
    c.refuse_envelope({"$ds": 2, "other": 1}, "r", "state")  # not an envelope: fine


def test_shown_stands_in_for_what_it_cannot_open() -> None:
    """Without the key a value is shown as encrypted (naming the key id) instead of
    failing; compressed values still open."""
    codec = c.ValueCodec(
        compression=c.Compression(threshold=10), keys=c.Keyring("k9", {"k9": key()})
    )
    where = c.place("r", "x")
    stored = codec.encode(TEXT, dumps(TEXT), where)
    shown = c.Shown(None).decode(stored, where, "r")
    assert isinstance(shown, c.Encrypted) and "k9" in str(shown)
    zipped = c.ValueCodec(compression=c.Compression(threshold=10)).encode(TEXT, dumps(TEXT), where)
    assert c.Shown(None).decode(zipped, where, "r") == TEXT


def test_codec_from_the_environment(tmp_path: Path) -> None:
    """DURABLE_CODEC with DURABLE_KEY (and DURABLE_KEY_ID), or DURABLE_KEYS_FILE for
    rotation; each bad value is a ConfigurationError naming its variable, never the key."""
    k = key()
    assert c.from_env({}) is None and c.from_env({"DURABLE_CODEC": "none"}) is None
    both = c.from_env({"DURABLE_CODEC": "zstd,aes256gcm", "DURABLE_KEY": k})
    assert both is not None and both.compression and both.keys and both.keys.current == "k1"
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({"old": key(), "new": k}))
    ring = c.from_env({"DURABLE_CODEC": "aes256gcm", "DURABLE_KEYS_FILE": str(keys),
                       "DURABLE_KEY_ID": "new"})  # fmt: skip
    assert ring is not None and ring.keys is not None and ring.keys.current == "new"
    bad = [
        ({"DURABLE_CODEC": "rot13"}, "DURABLE_CODEC"),
        ({"DURABLE_CODEC": "aes256gcm"}, "DURABLE_KEY"),
        ({"DURABLE_CODEC": "aes256gcm", "DURABLE_KEY": "c2hvcnQ="}, "DURABLE_KEY"),
        ({"DURABLE_CODEC": "aes256gcm", "DURABLE_KEYS_FILE": str(tmp_path / "no")},
         "DURABLE_KEYS_FILE"),
        ({"DURABLE_CODEC": "aes256gcm", "DURABLE_KEY_ID": "x", "DURABLE_KEYS_FILE": str(keys)},
         "DURABLE_KEY_ID"),
    ]  # fmt: skip
    for env, variable in bad:
        with pytest.raises(ds.ConfigurationError) as err:
            c.from_env(env)
        assert err.value.variable == variable, env  # type: ignore[attr-defined]
        assert k not in str(err.value)


def test_each_value_carries_its_keys_check_value_and_a_wrong_key_is_a_codec_error() -> None:
    """An envelope names its key id and carries the key's check value: another key under
    the same id is told from damage -- CodecError naming the key id and the run, with no
    advice to delete -- and the check value is neither the key nor shared by two keys."""
    k1, other = key(), key()
    writer = c.ValueCodec(keys=c.Keyring("k1", {"k1": k1}))
    stored = writer.encode(TEXT, dumps(TEXT), c.place("r", "state:t"))
    assert stored["c"] == c.check_value(base64.b64decode(k1)) != c.check_value(os.urandom(32))
    assert stored["c"] not in (k1, k1[:8])
    reader = c.ValueCodec(keys=c.Keyring("k1", {"k1": other}))
    with pytest.raises(ds.CodecError) as err:
        reader.decode(stored, c.place("r", "state:t"), "r")
    assert (err.value.key_id, err.value.run_id) == ("k1", "r")  # type: ignore[attr-defined]
    assert "another key" in str(err.value) and "delete" not in str(err.value)


def test_an_envelope_from_before_check_values_that_does_not_open_is_wrong_key_or_damaged() -> None:
    """An envelope written before check values (no ``c``) still opens with its key; one
    that does not authenticate may be a wrong key as well as damage: a CodecError that
    says both and advises no deletion."""
    k1 = key()
    writer = c.ValueCodec(keys=c.Keyring("k1", {"k1": k1}))
    old = {k: v for k, v in writer.encode(TEXT, dumps(TEXT), c.place("r", "s")).items() if k != "c"}
    assert writer.decode(old, c.place("r", "s"), "r") == TEXT
    reader = c.ValueCodec(keys=c.Keyring("k1", {"k1": key()}))
    with pytest.raises(ds.CodecError, match="wrong key or damaged") as err:
        reader.decode(old, c.place("r", "s"), "r")
    assert err.value.key_id == "k1" and "delete" not in str(err.value)  # type: ignore[attr-defined]

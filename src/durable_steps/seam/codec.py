"""Codecs: state values and call results compressed and encrypted at rest, one value at a
time.

A store given a ``codec`` (``codec=``, or ``DURABLE_CODEC`` through ``store_from_env``)
writes each top-level state value and each call result through it, not the state as
one blob, so a save still writes only what it changes: the update's values, encoded.
Everything else -- status, lease, step names, signals' names, timers, the keys of the
state -- stays clear, so listing, ``run_info``, leases and operators work without the
key.

An encoded value is a JSON object that says what it was encoded with (an *envelope*)::

    {"$ds": 2, "z": "zstd", "k": "2026-12", "c": "<check>", "n": "<nonce>", "v": "<payload>"}

``$ds`` marks it and says how its bytes are written as text: 2, base64 (what is
written); 1, base85 (what the first codec wrote, still read: ``formats.base85``).
``z`` the compression (``zstd`` or ``gzip``; absent: none); ``k`` the key id, ``c``
the key's check value and ``n`` the nonce of AES-256-GCM (absent: not encrypted);
``v`` the bytes. So a store reads a mix of plain
and encoded values: a run written before the codec was turned on still loads, and one
written with it loads anywhere that has its keys. A plain value shaped like an envelope
is refused (``InvalidStateError``).

Why base64: it is the standard library's C code (``binascii``), about 3 µs for a 1 KB
value, where base85 is pure Python, about 100 µs -- more than everything else an
encrypted save adds (``benchmarks/codec.py``: a trivial FileStore step). Base64 is
6% longer than base85 (4/3 against 5/4).

- Compression (``Compression``): values whose JSON is at least ``threshold`` bytes,
  with ``zstandard`` when it is installed (extra ``[zstd]``), else ``gzip`` (stdlib);
  kept only when smaller.
- Encryption (``Encryption``): AES-256-GCM (``cryptography``, extra ``[encryption]``),
  a fresh 96-bit nonce per value, and as authenticated data the run id and the
  value's place (``state:KEY`` or ``call:TASK/I``): a value copied to another run or
  key does not decrypt. Keys come from a ``Keyring`` -- the environment, a file, or a
  callable (Azure Key Vault): values are written with its current key id and read
  with whichever id they name, so rotating keys keeps old runs readable.
- The check value (``check_value``) tells a wrong key from damage: 6 bytes of an
  HMAC-SHA256 of a constant under a key derived from the key (itself an HMAC under the
  key), so it reveals nothing that helps find the key. A missing key, or a key whose
  check value is not the value's -- another key configured under the same id -- is
  ``CodecError`` naming the key id and the run. A value whose authentication fails
  under its own (checked) key was altered or copied from another place:
  ``CorruptCheckpointError``. An envelope written before check values (no ``c``) that
  does not authenticate may be either: ``CodecError``, "wrong key or damaged", which
  advises no deletion. All are raised at load, so a run that cannot be read is never
  written over. ``Shown`` reads what it can and stands ``Encrypted(key id)`` in
  for the rest (``runs show`` and the console without the key).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import (
    CodecError,
    ConfigurationError,
    CorruptCheckpointError,
    InvalidStateError,
    damaged_value,
    key_or_damage,
    missing_key,
    wrong_key,
)
from .formats import base85

MARK = "$ds"
_FIELDS = frozenset({MARK, "z", "k", "c", "n", "v"})
BASE85, BASE64 = base85.VERSION, 2
"""The envelope's versions (its ``$ds``): how its bytes are written as text."""


def is_envelope(value: object) -> bool:
    return (
        isinstance(value, dict) and value.get(MARK) in (BASE64, BASE85) and value.keys() <= _FIELDS
    )


class Codec(Protocol):
    """Turns one JSON value into what is stored, and back. ``where`` (the run id and the
    value's place) is authenticated data for codecs that encrypt."""

    def encode(self, value: Any, data: bytes, where: bytes) -> Any:
        """The stored form of ``value`` (whose compact JSON is ``data``)."""
        ...

    def decode(self, stored: Any, where: bytes, run_id: str) -> Any:
        """The value a stored form stands for (a plain value is returned as it is)."""
        ...


def _text(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


def _bytes(stored: dict[str, Any], field: str, run_id: str) -> bytes:
    """The bytes of an envelope's ``field``, written as its version says."""
    text = str(stored.get(field))
    try:
        if stored[MARK] == BASE85:
            return base85.envelope_bytes(text)
        return binascii.a2b_base64(text, strict_mode=True)
    except ValueError:  # (binascii.Error is one)
        written = "base85" if stored[MARK] == BASE85 else "base64"
        raise damaged_value(run_id, f"its {field!r} is not {written}") from None


def check_value(key: bytes) -> str:
    """A key's check value, as envelopes carry it (see the top): 6 bytes, base64."""
    derived = hmac.digest(key, b"durable-steps: key check, derived key", hashlib.sha256)
    return _text(hmac.digest(derived, b"durable-steps: key check", hashlib.sha256)[:6])


class Keyring:
    """AES-256 keys by id: ``current`` encrypts, any of ``keys`` decrypts. ``keys`` may be
    a mapping or a callable ``key_id -> bytes | None`` (Azure Key Vault, a secret
    store); a mapping's values may be raw 32 bytes or their base64."""

    def __init__(
        self, current: str, keys: Mapping[str, bytes | str] | Callable[[str], bytes | None]
    ) -> None:
        self.current = current
        self._lookup = keys if callable(keys) else dict(keys).get
        self._cache: dict[str, bytes] = {}
        if self.key(current, "") is None:
            raise ConfigurationError(
                f"the current encryption key {current!r} is not in the keyring: give its "
                "32 bytes (base64) under that id",
                variable="DURABLE_KEY_ID",
            )

    def key(self, key_id: str, run_id: str) -> bytes | None:
        if key_id not in self._cache:
            raw = self._lookup(key_id)
            if raw is None:
                return None
            self._cache[key_id] = _key_bytes(raw, key_id)
        return self._cache[key_id]

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Keyring:
        """``DURABLE_KEY`` (base64 of 32 bytes) with ``DURABLE_KEY_ID`` (default ``k1``),
        and ``DURABLE_KEYS_FILE``: a JSON object of key id -> base64 key (old keys for
        reading; the file may hold the current one too)."""
        keys: dict[str, bytes | str] = {}
        path = env.get("DURABLE_KEYS_FILE", "").strip()
        if path:
            try:
                with open(path, encoding="utf-8") as f:
                    loaded = json.load(f)
            except (OSError, ValueError) as exc:
                raise ConfigurationError(
                    f"DURABLE_KEYS_FILE={path!r} cannot be read as a JSON object of key id -> "
                    f"base64 key ({type(exc).__name__})",
                    variable="DURABLE_KEYS_FILE",
                ) from None
            if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
                raise ConfigurationError(
                    f"DURABLE_KEYS_FILE={path!r} must hold a JSON object of key id -> base64 key",
                    variable="DURABLE_KEYS_FILE",
                )
            keys.update(loaded)
        current = env.get("DURABLE_KEY_ID", "").strip() or "k1"
        if env.get("DURABLE_KEY", "").strip():
            keys[current] = env["DURABLE_KEY"].strip()
        if not keys:
            raise ConfigurationError(
                "DURABLE_CODEC asks for encryption, but no key is configured: set DURABLE_KEY "
                "(base64 of 32 random bytes, e.g. from 'python -c \"import os, base64; "
                "print(base64.b64encode(os.urandom(32)).decode())\"') or DURABLE_KEYS_FILE",
                variable="DURABLE_KEY",
            )
        return cls(current, keys)


def _key_bytes(raw: bytes | str, key_id: str) -> bytes:
    if isinstance(raw, bytes) and len(raw) == 32:
        return raw
    try:
        key = base64.b64decode(raw, validate=True)
    except ValueError:
        key = b""
    if len(key) != 32:
        raise ConfigurationError(
            f"encryption key {key_id!r} is not 32 bytes (base64 of 32 random bytes); the "
            "key itself is not repeated here",
            variable="DURABLE_KEY",
        )
    return key


@dataclass(frozen=True)
class Compression:
    """Values of at least ``threshold`` bytes of JSON, compressed (zstd, else gzip)."""

    threshold: int = 1024
    level: int = 3

    def squeeze(self, data: bytes) -> tuple[str | None, bytes]:
        if len(data) < self.threshold:
            return None, data
        kind, packed = _compress(data, self.level)
        return (kind, packed) if len(packed) < len(data) else (None, data)


def _compress(data: bytes, level: int) -> tuple[str, bytes]:
    try:
        import zstandard
    except ImportError:
        return "gzip", gzip.compress(data, compresslevel=min(level * 2, 9), mtime=0)
    return "zstd", zstandard.ZstdCompressor(level=level).compress(data)


def _decompress(kind: object, data: bytes, run_id: str) -> bytes:
    if kind == "gzip":
        return gzip.decompress(data)
    if kind != "zstd":
        raise damaged_value(run_id, f"it names an unknown compression {kind!r}")
    try:
        import zstandard
    except ImportError:
        raise CodecError(
            f"run {run_id!r} has values compressed with zstd, and zstandard is not installed: "
            "pip install 'durable-steps[zstd]'",
            run_id=run_id,
            key_id=None,
        ) from None
    return zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 31)


class ValueCodec:
    """The codec of the stores: compression and/or encryption, per value (see the top)."""

    def __init__(self, *, compression: Compression | None = None, keys: Keyring | None = None):
        if compression is None and keys is None:
            raise ValueError("a codec compresses, encrypts, or both: give compression= or keys=")
        self.compression, self.keys = compression, keys
        self._ciphers: dict[str, Any] = {}  # key id -> its AESGCM (Keyring caches the key)
        self._checks: dict[str, str] = {}  # key id -> its key's check value
        if keys is not None:
            try:
                from cryptography.hazmat.primitives.ciphers.aead import AESGCM
            except ImportError:
                raise ConfigurationError(
                    "encryption needs the cryptography package: pip install "
                    "'durable-steps[encryption]'",
                    variable="DURABLE_CODEC",
                ) from None
            self._aead = AESGCM

    def _cipher(self, key_id: str, run_id: str) -> Any:
        """The AES-GCM of key ``key_id``, made once per key (``CodecError`` without it)."""
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            key = None if self.keys is None else self.keys.key(key_id, run_id)
            if key is None:
                raise missing_key(run_id, key_id)
            # The check value first: another thread that finds the cipher reads it next.
            self._checks[key_id] = check_value(key)
            cipher = self._ciphers[key_id] = self._aead(key)
        return cipher

    def __repr__(self) -> str:
        parts = [*(["compression"] * bool(self.compression)), *(["aes256gcm"] * bool(self.keys))]
        return f"ValueCodec({'+'.join(parts)})"

    def encode(self, value: Any, data: bytes, where: bytes) -> Any:
        kind, payload = (None, data) if self.compression is None else self.compression.squeeze(data)
        if self.keys is None:
            if kind is None:
                return value  # not worth compressing: stored plain
            return {MARK: BASE64, "z": kind, "v": _text(payload)}
        key_id = self.keys.current
        nonce = secrets.token_bytes(12)
        sealed = self._cipher(key_id, "").encrypt(nonce, payload, where)
        check = self._checks[key_id]
        env: dict[str, Any] = {
            MARK: BASE64,
            "k": key_id,
            "c": check,
            "n": _text(nonce),
            "v": _text(sealed),
        }
        if kind is not None:
            env["z"] = kind
        return env

    def decode(self, stored: Any, where: bytes, run_id: str) -> Any:
        if not is_envelope(stored):
            return stored
        payload = _bytes(stored, "v", run_id)
        if "k" in stored:
            payload = self._open(stored, payload, where, run_id)
        if "z" in stored:
            payload = _decompress(stored["z"], payload, run_id)
        try:
            return json.loads(payload)
        except ValueError:
            raise damaged_value(run_id, "it does not decode to JSON") from None

    def _open(self, stored: dict[str, Any], payload: bytes, where: bytes, run_id: str) -> bytes:
        key_id = str(stored["k"])
        cipher = self._cipher(key_id, run_id)
        from cryptography.exceptions import InvalidTag

        checked = "c" in stored
        if checked and stored["c"] != self._checks[key_id]:
            raise wrong_key(run_id, key_id)
        nonce = _bytes(stored, "n", run_id)
        try:
            return bytes(cipher.decrypt(nonce, payload, where))
        except InvalidTag:
            if not checked:  # written before check values: the key may be the cause
                raise key_or_damage(run_id, key_id) from None
            raise damaged_value(
                run_id,
                f"it does not authenticate under key {key_id!r}, which is the key it was "
                "written with (its check value matches): altered, or copied from another "
                "run or place",
            ) from None


@dataclass(frozen=True)
class Encrypted:
    """What ``Shown`` puts in place of a value it cannot open."""

    key_id: str | None

    def __str__(self) -> str:
        return f"<encrypted with key {self.key_id!r}>" if self.key_id else "<compressed>"


class Shown:
    """For showing runs (``runs show``, the console): opens what ``codec`` can, and
    stands ``Encrypted`` in for what it cannot instead of failing."""

    def __init__(self, codec: Codec | None) -> None:
        self.codec = codec

    def encode(self, value: Any, data: bytes, where: bytes) -> Any:
        # A tool that shows runs may act on them too (a console's fork): it writes as the
        # store would. A value it could not open is an Encrypted, not JSON: refused there.
        return value if self.codec is None else self.codec.encode(value, data, where)

    def decode(self, stored: Any, where: bytes, run_id: str) -> Any:
        if not is_envelope(stored):
            return stored
        try:
            if self.codec is None:
                if "k" in stored:
                    raise missing_key(run_id, str(stored["k"]))
                return ValueCodec(compression=Compression()).decode(stored, where, run_id)
            return self.codec.decode(stored, where, run_id)
        except (CodecError, CorruptCheckpointError):
            return Encrypted(str(stored["k"]) if "k" in stored else None)


def refuse_envelope(value: object, run_id: str, key: str) -> None:
    """``InvalidStateError`` for a plain value that would read back as an envelope."""
    if is_envelope(value):
        raise InvalidStateError(
            f"run {run_id!r}: the value of {key!r} is a JSON object shaped like durable-steps' "
            f"encoded values (a {MARK!r} member); rename that member",
            run_id=run_id,
        )


def place(run_id: str, where: str) -> bytes:
    """The authenticated data of a value: its run and its place in it."""
    return f"{run_id}\x00{where}".encode()


def from_env(env: Mapping[str, str]) -> ValueCodec | None:
    """``DURABLE_CODEC``: ``none`` (default), ``zstd`` (compression), ``aes256gcm``
    (encryption), or both (``zstd,aes256gcm``); keys as ``Keyring.from_env`` reads them."""
    value = env.get("DURABLE_CODEC", "").strip().lower()
    if value in ("", "none"):
        return None
    parts = {p.strip() for p in value.replace("+", ",").split(",") if p.strip()}
    if not parts <= {"zstd", "gzip", "aes256gcm"}:
        raise ConfigurationError(
            f"DURABLE_CODEC={value!r} is not a codec; use none, zstd, aes256gcm or zstd,aes256gcm",
            variable="DURABLE_CODEC",
        )
    threshold = env.get("DURABLE_COMPRESS_MIN", "").strip()
    if threshold and not threshold.isdigit():
        raise ConfigurationError(
            f"DURABLE_COMPRESS_MIN={threshold!r} is not a number of bytes",
            variable="DURABLE_COMPRESS_MIN",
        )
    compression = (
        Compression(threshold=int(threshold or 1024)) if parts & {"zstd", "gzip"} else None
    )
    keys = Keyring.from_env(env) if "aes256gcm" in parts else None
    return ValueCodec(compression=compression, keys=keys)

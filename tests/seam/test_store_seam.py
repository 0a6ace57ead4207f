"""The seam's helpers on every save's path (``seam.checkpoint``, ``seam.rules``): each
fast version gives exactly
what the plain one would -- ``evolve`` as ``dataclasses.replace``, the run-id check's
first look as the full rules, the cached encoder as ``json`` -- and etags stay unique
without a system call each."""

from __future__ import annotations

import itertools
import json
import os
import re
import warnings
from dataclasses import replace
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.seam import checkpoint, document, etags, rules


@pytest.mark.parametrize(
    "changes",
    [
        {"etag": "e" * 24, "updated_at": 5.0},
        {"status": "completed"},
        {"status": "failed", "error": {"type": "E"}},
        {"done": True},  # replace keeps the old status, which wins: still running
        {"status": None, "done": True},
        {"step": 3, "steps": ("a", "b", "c", "d"), "attempt": 1, "owner": None},
    ],
)
def test_evolve_is_replace(changes: dict[str, Any]) -> None:
    cp = ds.Checkpoint("r", 0, {"a": 1}, etag="x" * 24, steps=("a",), owner="me", attempt=2)
    assert checkpoint.evolve(cp, **changes) == replace(cp, **changes)  # every field, done too


def test_evolve_refuses_what_replace_refuses() -> None:
    cp = ds.Checkpoint("r", -1, {})
    with pytest.raises(ValueError, match="status must be one of"):
        checkpoint.evolve(cp, status="paused")
    with pytest.raises(TypeError, match="no field"):
        checkpoint.evolve(cp, stpe=1)


def test_the_run_id_checks_first_look_lets_through_no_id_the_rules_refuse() -> None:
    """Every character the rules treat specially -- forbidden, control, surrogate,
    whitespace -- alone, first, last and inside an id: wherever the full check refuses
    the id, the first look (one regex search) sends it to the full check."""
    special = [
        c
        for c in map(chr, range(0x110000))
        if c in "/\\?#." or c.isspace() or ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F
    ]
    special += [chr(c) for c in range(0xD800, 0xE000)]
    refused = 0
    for c in special:
        for run_id in (c, c + c, "a" + c, c + "a", "a" + c + "a"):
            try:
                rules.check_run_id(run_id)
            except ds.InvalidRunIdError:
                refused += 1
                assert rules._SUSPECT.search(run_id), ascii(run_id)
    assert refused > 4 * 2048  # the surrogates alone


def test_valid_ids_pass_and_bad_ones_get_the_full_message() -> None:
    assert rules.check_run_id("ünï-✓ 1.2") == "ünï-✓ 1.2"
    with pytest.raises(ds.InvalidRunIdError, match="starts or ends with whitespace"):
        rules.check_run_id("a\u2003")
    with pytest.raises(ds.InvalidRunIdError, match="control character"):
        rules.check_run_id("a\x85b")


def test_etags_are_24_hex_digits_and_never_repeat() -> None:
    seen = {etags.new_etag() for _ in range(100_000)}
    assert len(seen) == 100_000
    assert all(re.fullmatch("[0-9a-f]{24}", e) for e in seen)


def test_a_counter_used_up_draws_a_new_prefix() -> None:
    source = etags._Etags()
    prefix, _ = source.current
    source.current = (prefix, itertools.count(0xFFFFFFFE))
    first = [source.new() for _ in range(4)]
    assert first[0] == prefix + "fffffffe"
    assert first[1] == prefix + "ffffffff"
    assert first[2][:16] != prefix  # a new prefix, counting from 0 again
    assert first[2][16:] == "00000000"
    assert len(set(first)) == 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_makes_other_etags_than_its_parent() -> None:
    """Parent and child would count the same numbers after the same prefix: the child
    draws its own prefix at the fork."""
    read, write = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:
        try:
            os.write(write, " ".join(etags.new_etag() for _ in range(10)).encode())
        finally:
            os._exit(0)
    os.close(write)
    theirs = os.read(read, 1000).decode().split()
    os.waitpid(pid, 0)
    ours = [etags.new_etag() for _ in range(10)]
    assert len(theirs) == 10
    assert not set(theirs) & set(ours)
    assert {e[:16] for e in theirs} != {e[:16] for e in ours}


@pytest.mark.parametrize(
    "doc",
    [
        {"a": [1, 2.5, None, True, False, 'é\n\u2028\x00"\\'], "b": {}, "c": -1e300},
        {"schema": 2, "lease_expires": 1764754000.123456, "k": "x" * 5000, "n": []},
        {"ü-key": {"nested": [[[]], {"x": 0.1}]}, "big": 2**53 - 1, "neg": -(2**53 - 1)},
    ],
)
def test_the_cached_encoder_writes_what_json_writes(doc: dict[str, Any]) -> None:
    plain = json.dumps(doc, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    assert document.dumps(doc) == plain.encode()


def test_the_encoder_refuses_nan_and_objects() -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        document.dumps({"x": float("nan")})
    with pytest.raises(TypeError, match="not JSON serializable"):
        document.dumps({"x": object()})

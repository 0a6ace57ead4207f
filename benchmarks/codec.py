"""Part 10: what the codec costs (issue 30; DESIGN, "Performance": codec).

- Trivial steps on FileStore with encryption (AES-256-GCM) against the same steps
  without, in alternating rounds of the same run (target ≤ 1.3x).
- The agent loop (one step, ``agent.CALLS`` durable calls of 2 KB) on an encrypted
  FileStore: call 500 against call 1 (flat: ≤ 1.5x) -- each call encrypts its own
  result, never the journal before it.
- Bytes sent to Cosmos DB (cosmos-local, through the counting proxy) by a state that
  grows by text -- an agent's conversation, a list extended by 20 KB of prose a step
  (a retrieved document and an answer) for 200 steps -- with compression (zstd) on
  against off (target ≤ 0.5x): an ``extend`` compresses its appended items one by one,
  so each save still sends its own update (flat from step 1 to 200 either way). The
  same at 5 KB a step is shown, not judged: a save's fixed part (the head's fields and
  the HTTP requests, ~2.7 KB) is then half of what it sends, and compression cannot
  touch it (5 KB of prose compress to ~1.9 KB, base64 included).
"""

from __future__ import annotations

import base64
import os
import random
import secrets
import time
from pathlib import Path
from typing import Any

import durable_steps as ds
from durable_steps.seam.codec import Compression, Keyring, ValueCodec

from .agent import AT, CALLS, RESULT, per_call
from .common import KB, Metered, StepClock, Table, median, ms, size, text
from .floors import TRIVIAL_STEPS, timed_run

GROW_STEPS = 200
_PROSE = """the model asked for the weather in Paris and the tool answered with a forecast
of light rain then sun while the user wanted to know whether to bring an umbrella to the
meeting at noon near the river where the team would review the quarterly plan for
shipping durable agents that never lose their work when a worker crashes"""
WORDS = tuple(_PROSE.split())


def encrypted() -> ValueCodec:
    return ValueCodec(keys=Keyring("bench", {"bench": base64.b64encode(os.urandom(32))}))


def prose(i: int, n: int = 5 * KB) -> str:
    """About ``n`` characters of text-like words, different for every ``i``: what an
    agent's conversation holds (compressible as text is, unlike ``common.text``)."""
    rng = random.Random(i)
    out: list[str] = []
    length = 0
    while length < n:
        word = rng.choice(WORDS)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:n]


def file_codec(table: Table, base: Path, quick: bool) -> None:
    trivial(table, base, quick)
    agent_loop(table, base, quick)


def trivial(table: Table, base: Path, quick: bool) -> None:
    clock = StepClock()
    notes = [text(i, KB) for i in range(TRIVIAL_STEPS)]
    steps = [
        ds.Step(f"s{i:02d}", clock(lambda state, i=i: {"note": notes[i]}))
        for i in range(TRIVIAL_STEPS)
    ]
    plain, coded = [], []
    with (
        ds.FileStore(base / "codec-plain") as bare,
        ds.FileStore(base / "codec-aes", codec=encrypted()) as aes,
    ):
        for _ in range(5 if quick else 25):  # alternating: a busy disk slows both alike
            plain.append(median(timed_run(clock, steps, bare)[0]))
            coded.append(median(timed_run(clock, steps, aes)[0]))
    table.judge(
        "10",
        f"FileStore per step encrypted, {TRIVIAL_STEPS} trivial steps (1 KB each)",
        ms(median(coded)),
        median(coded) / median(plain),
        1.3,
        note=f"vs the same steps without a codec, same rounds: {ms(median(plain))}",
    )


def agent_loop(table: Table, base: Path, quick: bool) -> None:
    starts: list[float] = []
    results = [text(n, RESULT) for n in range(CALLS + 1)]

    def result(n: int) -> str:
        starts.append(time.perf_counter())
        return results[n]

    def agent(state: Any) -> dict[str, Any]:
        for n in range(CALLS + 1):  # the last one only marks when call 500 ended
            ds.call("tool", result, n)
        return {"calls": CALLS}

    runs: dict[str, list[dict[int, float]]] = {"plain": [], "aes": []}
    with (
        ds.FileStore(base / "codec-agent", codec=encrypted()) as aes,
        ds.FileStore(base / "codec-agent-plain") as bare,
    ):
        for _ in range(1 if quick else 5):  # alternating, as the trivial steps
            for name, store in (("plain", bare), ("aes", aes)):
                starts.clear()
                ds.run(f"a-{secrets.token_hex(4)}", [ds.Step("agent", agent)], store)
                runs[name].append(per_call(starts))
    calls = {k: {n: median([r[n] for r in v]) for n in AT} for k, v in runs.items()}
    table.judge(
        "10",
        "agent loop encrypted: per call at calls 1 / 250 / 500",
        " / ".join(ms(calls["aes"][n]) for n in AT),
        calls["aes"][AT[-1]] / calls["aes"][AT[0]],
        1.5,
        note=f"ratio: call {AT[-1]} : call {AT[0]} (flat); FileStore, results of 2 KB; "
        f"without a codec, same rounds: {' / '.join(ms(calls['plain'][n]) for n in AT)}",
    )


def cosmos_codec(table: Table, endpoint: str, quick: bool) -> None:
    count = 50 if quick else GROW_STEPS
    for chunk, judged in ((5 * KB, False), (20 * KB, True)):
        sent, per_step = {}, {}
        for name, codec in (("plain", None), ("zstd", ValueCodec(compression=Compression()))):
            sent[name], per_step[name] = grown(endpoint, name, codec, count, chunk)
        what = (
            f"Cosmos bytes sent, a state growing by {size(chunk)} of text a step "
            f"({count} steps), zstd : none"
        )
        measured = f"{size(sent['zstd'])} : {size(sent['plain'])}"
        note = (
            f"a save at step 1 / {count}: {' / '.join(map(size, per_step['zstd']))} with zstd, "
            f"{' / '.join(map(size, per_step['plain']))} without"
        )
        if judged:
            table.judge("10", what, measured, sent["zstd"] / sent["plain"], 0.5, note=note)
        else:  # a save's fixed part (its head, HTTP) outweighs what 5 KB compresses away
            ratio = sent["zstd"] / sent["plain"]
            table.add("10", what, measured, note=f"{ratio:.2f}x; {note}")


def grown(
    endpoint: str, name: str, codec: ValueCodec | None, count: int, chunk: int
) -> tuple[int, tuple[int, int]]:
    """Bytes sent by a run whose ``count`` steps each append ``chunk`` characters of
    prose to a list, and by its first and last step's saves."""
    from .cosmos import Wire

    wire = Wire(endpoint, f"bench-codec-{name}-{chunk}", codec=codec)
    try:
        metered = Metered(wire.store, wire.meter)

        def grow(state: Any, i: int) -> dict[str, Any]:
            return {"messages": [*state["messages"], prose(i, chunk)]}

        steps = [ds.Step(f"s{i:03d}", lambda state, i=i: grow(state, i)) for i in range(count)]
        ds.Workflow("grow-text", steps).run(
            f"text-{secrets.token_hex(4)}", metered, input={"messages": []}
        )
        saves = [c for c in metered.calls if c.writes]
        total = sum(c.delta["sent"] for c in metered.calls)
        return total, (saves[1].delta["sent"], saves[-2].delta["sent"])
    finally:
        wire.close()

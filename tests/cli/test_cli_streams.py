"""`durable-steps runs stream` and `runs events`, and the events in `runs show`: a real
process against the file store and cosmos-local."""

from __future__ import annotations

import json
from typing import Any

import durable_steps as ds

from ..helpers.clitools import Cli


def streamed_run(cli: Cli, run_id: str) -> None:
    """A completed run that streamed three chunks (the third closes nothing: the run's
    end ends the stream) and set two events."""

    def gen() -> str:
        ds.write_stream("answer", "Hel")
        ds.write_stream("answer", {"token": "lo"})
        return "Hello"

    def step(state: Any) -> dict[str, Any]:
        ds.set_event("progress", {"done": 1})
        ds.call("llm", gen)
        ds.write_stream("answer", "!")
        ds.set_event("model", "m1")
        return {}

    with cli.store() as store:
        ds.run(run_id, [ds.Step("s", step)], store)


def test_stream_prints_chunks_and_resumes_after_an_offset(cli: Cli, run_id: str) -> None:
    """`runs stream` prints offset and chunk per line; --json one object per line;
    --after N the rest; --follow stops at the run's end; an unknown run is one line;
    `runs streams` lists the run's streams with their lengths; a stream name the run
    does not have is one line naming the streams it has, exit 1, with or without
    --follow."""
    streamed_run(cli, run_id)
    done = cli("runs", "stream", run_id, "answer")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ['0\t"Hel"', '1\t{"token": "lo"}', '2\t"!"']
    rest = cli("runs", "stream", run_id, "answer", "--after", "0", "--follow", "--json")
    assert [json.loads(line) for line in rest.stdout.splitlines()] == [
        {"offset": 1, "chunk": {"token": "lo"}},
        {"offset": 2, "chunk": "!"},
    ]
    missing = cli("runs", "stream", f"{run_id}-none", "answer")
    assert missing.returncode == 1 and "has no checkpoint" in missing.stderr
    listed = cli("runs", "streams", run_id)
    assert listed.stdout.splitlines() == ["answer\t3 entries\topen"], listed.stderr
    for flags in ([], ["--follow"], ["--follow", "--wait"]):  # the run ended: never written
        typo = cli("runs", "stream", run_id, "answr", *flags)
        assert (typo.returncode, typo.stdout) == (1, ""), (flags, typo.stdout)
        said = f"error: run {run_id!r} has no stream 'answr' (its streams: 'answer')"
        assert typo.stderr.startswith(said), typo.stderr


def test_events_and_show_list_the_published_events(cli: Cli, run_id: str) -> None:
    """`runs events` lists every event (--json: key to value); `runs show` has them too."""
    streamed_run(cli, run_id)
    assert cli.json("runs", "events", run_id) == {"model": "m1", "progress": {"done": 1}}
    text = cli("runs", "events", run_id)
    assert 'progress: {"done": 1}' in text.stdout and 'model: "m1"' in text.stdout
    shown = cli.json("runs", "show", run_id)
    assert shown["events"] == {"model": "m1", "progress": {"done": 1}}
    assert "events" in cli("runs", "show", run_id, "--no-state").stdout

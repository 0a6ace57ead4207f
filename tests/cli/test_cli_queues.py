"""`runs start --queue --priority --partition` and the queue and priority columns of
`runs list` -- a real process against the file store and cosmos-local."""

from __future__ import annotations

from ..helpers.clitools import Cli


def test_start_places_a_run_on_a_queue_and_list_shows_it(cli: Cli, run_id: str) -> None:
    """`runs start --queue Q --priority P --partition K` records where the workers take
    the run; `runs list` shows queue (~partition) and priority columns, and `--json` the
    fields."""
    done = cli(
        "runs", "start", run_id, "--workflow", "fulfil", "--new-workflow",
        "--queue", "orders", "--priority", "7", "--partition", "acme",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with cli.store() as store:
        cp = store.load(run_id)
    assert (cp.queue, cp.priority, cp.partition) == ("orders", 7, "acme")
    listed = cli("runs", "list", "--workflow", "fulfil")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()[1:3]
    assert header.split()[:6] == ["run", "id", "status", "workflow", "queue", "priority"]
    assert row.split()[:5] == [run_id, "running", "fulfil", "orders~acme", "7"]
    [entry] = cli.json("runs", "list", "--workflow", "fulfil")
    assert (entry["queue"], entry["priority"], entry["partition"]) == ("orders", 7, "acme")


def test_list_without_queued_runs_has_no_queue_columns(cli: Cli, run_id: str) -> None:
    """Runs of no queue are listed as before: no empty queue columns."""
    assert cli("runs", "start", run_id, "--workflow", "plain", "--new-workflow").returncode == 0
    header = cli("runs", "list").stdout.splitlines()[1]
    assert "queue" not in header and "priority" not in header


def test_a_priority_without_a_queue_is_refused_in_one_line(cli: Cli, run_id: str) -> None:
    """A priority orders the runs of a queue: without --queue it is a usage error that
    says so, and nothing is started."""
    done = cli("runs", "start", run_id, "--workflow", "fulfil", "--new-workflow", "--priority", "3")
    assert done.returncode == 2
    assert "give queue= (--queue) too" in done.stderr
    with cli.store() as store:
        assert store.load(run_id) is None

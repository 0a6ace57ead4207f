"""The runs list's new filters and the tokens, as units: times as typed, empty time
ranges, the error filter on a real store, and what each token signs in to."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import durable_steps as ds
from durable_steps.console.listing import FilterError, Filters, Listings, moment
from durable_steps.console.security import Secrets


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("1700000000", 1700000000.0),
        ("2026-12-06", datetime(2026, 12, 6, tzinfo=UTC).timestamp()),
        ("2026-12-06T07:30", datetime(2026, 12, 6, 7, 30, tzinfo=UTC).timestamp()),
        ("2026-12-06 07:30:00Z", datetime(2026, 12, 6, 7, 30, tzinfo=UTC).timestamp()),
        ("2026-12-06T08:30+01:00", datetime(2026, 12, 6, 7, 30, tzinfo=UTC).timestamp()),
    ],
)
def test_times_as_typed(typed: str, expected: float) -> None:
    assert moment(typed, "since") == expected


def test_bad_times_and_empty_ranges_name_what_to_type() -> None:
    with pytest.raises(FilterError, match="until: 'soon' is not a time; give an ISO 8601"):
        Filters.parse({"until": "soon"})
    with pytest.raises(FilterError, match="the time range is empty"):
        Filters.parse({"since": "2026-12-06", "until": "2026-12-06"})
    f = Filters.parse({"since": "2026-12-05", "until": "2026-12-06", "error": " Timeout "})
    assert (f.since, f.until, f.error) == ("2026-12-05", "2026-12-06", "Timeout")
    assert f.any and Filters.parse(f.params()) == f


def _fail(state: Any) -> None:
    raise TimeoutError("the model did not answer")


def test_the_error_filter_reads_heads_not_completed_runs(tmp_path: Path) -> None:
    with ds.FileStore(tmp_path / "s") as store:
        with pytest.raises(TimeoutError):
            ds.run("slow", [ds.Step("ask", _fail)], store)
        ds.run("fine", [ds.Step("a", lambda s: {"v": 1})], store)
        listings = Listings(store)
        page = listings.page(Filters.parse({"error": "did NOT answer"}), 0)
        assert [r.run_id for r in page.rows] == ["slow"]
        assert listings.page(Filters.parse({"error": "TimeoutError"}), 0).rows[0].run_id == "slow"
        assert listings.page(Filters.parse({"error": "KeyError"}), 0).rows == []


def test_each_token_signs_in_to_its_own_session() -> None:
    s = Secrets("full-token", 8233, "read-token")
    assert (s.who("full-token"), s.who("read-token"), s.who("other"), s.who(None)) == (
        False, True, None, None,
    )  # fmt: skip
    assert s.session_of(s.session) is False and s.session_of(s.read_session or "") is True
    assert s.session_of("forged") is None and s.who("tökén") is None
    assert Secrets("full-token", 8233).who("read-token") is None
    with pytest.raises(ValueError, match="must differ"):
        Secrets("same", 8233, "same")

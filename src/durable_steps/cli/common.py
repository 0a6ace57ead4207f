"""What the commands of the command line share: the consoles, printing that never
misreads a value as markup, formats (times, sizes, ages, owners) and progress on
long work.

Every value that comes from a user, a store or an exception is printed as plain
text (``Text``, never parsed as Rich markup): a message that says
``pip install 'durable-steps[cosmos]'`` or a run id ``job[red]x`` prints as it
is. Output that is not a terminal is not wrapped at 80 columns, so a table piped
to ``grep`` keeps one run per line.
"""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Console
from rich.text import Text

from ..seam.lease import owner_label

options = {"debug": False}
"""Global flags of the command line, set by the group before a command runs."""


def _console(stderr: bool) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    terminal = stream.isatty() or "COLUMNS" in os.environ
    return Console(stderr=stderr, highlight=False, width=None if terminal else 10_000)


out = _console(stderr=False)
err = _console(stderr=True)

Part = str | tuple[str, str]


def say(*parts: Part, to: Console | None = None) -> None:
    """One line of plain text (str parts) and styled text ((text, style) parts)."""
    (to or out).print(Text.assemble(*parts), soft_wrap=True)


def note(*parts: Part) -> None:
    """A line for the operator on stderr (progress, confirmations, summaries)."""
    say(*parts, to=err)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def when(ts: float | None) -> str:
    if ts is None:
        return "-"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if n < 1024**2 else f"{n / 1024**2:.1f} MiB"


def owner(name: str) -> str:
    """A default owner id (ds1:host:boot:pid:start:random) as host and pid; others as given."""
    return owner_label(name)


_AGE = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def age(text: str) -> float:
    """Seconds in an age like 30m, 12h, 7d or 2w."""
    match = _AGE.match(text.strip().lower())
    if not match:
        raise click.BadParameter(
            f"{text!r} is not an age; give a number and a unit (s, m, h, d, w), e.g. 30m, "
            "12h, 7d or 2w",
            param_hint="'--older-than'",
        )
    return float(match[1]) * _UNIT[match[2]]


class Progress:
    """Counts long work on stderr: a live, transient line on a terminal; elsewhere (a
    log file, CI) one line every ``every`` items, so a long job shows it is alive."""

    def __init__(self, what: str, *, every: int = 1000, console: Console | None = None) -> None:
        self.what, self.every, self.done = what, every, 0
        self._console = console or err
        self._live: Any = None
        self._task: Any = None

    def __enter__(self) -> Progress:
        if self._console.is_terminal:
            from rich.progress import Progress as Live
            from rich.progress import SpinnerColumn, TextColumn

            self._live = Live(
                SpinnerColumn(),
                TextColumn("{task.description}: {task.completed:,}"),
                console=self._console,
                transient=True,
            )
            self._live.start()
            self._task = self._live.add_task(self.what, total=None)
        return self

    def advance(self) -> None:
        self.done += 1
        if self._live is not None:
            self._live.update(self._task, completed=self.done)
        elif self.done % self.every == 0:
            say(f"{self.what}: {self.done:,} so far", to=self._console)

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()


def json_value(data: str | None, data_file: str | None, option: str, what: str) -> Any:
    """The JSON value (the ``what``) given as ``--OPTION JSON`` or ``--OPTION-file PATH``
    ('-': standard input); None when neither was given."""
    if data is not None and data_file is not None:
        raise click.UsageError(f"give the {what} once: {option} JSON or {option}-file PATH")
    if data_file is not None:
        hint = f"'{option}-file'"
        try:
            if data_file == "-":
                text = sys.stdin.read()
            else:
                with open(data_file, encoding="utf-8") as f:
                    text = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise click.BadParameter(f"cannot read {data_file!r}: {exc}", param_hint=hint) from None
    elif data is not None:
        text, hint = data, f"'{option}'"
    else:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise click.BadParameter(
            f"not JSON ({exc}); give a JSON value, e.g. '{{\"ok\": true}}' (quoted for the shell)",
            param_hint=hint,
        ) from None

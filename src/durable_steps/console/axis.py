"""The timeline's time axis: seconds since the epoch to x, with long idle periods
compressed behind a visible break.

Why breaks: a run that failed, sat four minutes, and was resumed ran for seconds on
either side; drawn to scale, its attempts are slivers at the edges of a four-minute
gap. So a period when nothing ran (an ``IDLE`` event of ``timeline``: a retry's pause,
a failed run until resumed, a wait, a crashed run until the next claim) longer than
``SHARE`` of the whole span is drawn ``BREAK`` pixels wide, marked by a zigzag that
says how long it was; the rest of the width is shared by the other time, to scale.
"""

from __future__ import annotations

from collections.abc import Iterable

BREAK = 36.0
"""The width of a compressed period, in pixels."""
SHARE = 0.25
"""A period when nothing ran is compressed when it is longer than this share of the
whole span (and longer than ``MIN_GAP`` seconds)."""
MIN_GAP = 2.0


class Scale:
    """Seconds since the epoch to x over ``[left, right]``; ``gaps``: the periods when
    nothing ran, those long enough compressed (``breaks``)."""

    def __init__(
        self,
        times: Iterable[float],
        left: float,
        right: float,
        gaps: Iterable[tuple[float, float]] = (),
    ) -> None:
        known = sorted(times)
        self.t0 = known[0] if known else 0.0
        self.t1 = known[-1] if known else 1.0
        if self.t1 - self.t0 < 0.001:
            self.t0, self.t1 = self.t0 - 0.5, self.t1 + 0.5
        self.left, self.width = left, right - left
        total = self.t1 - self.t0
        self.breaks: list[tuple[float, float]] = []
        for start, end in sorted(gaps):
            a, b = max(start, self.t0), min(end, self.t1)
            long = b - a > max(SHARE * total, MIN_GAP)
            if long and (not self.breaks or a >= self.breaks[-1][1]):
                self.breaks.append((a, b))
        while self.breaks and len(self.breaks) * BREAK > self.width / 2:
            self.breaks.pop()  # too many to draw: the shortest kept to scale
        squeezed = sum(b - a for a, b in self.breaks)
        self.rate = (self.width - BREAK * len(self.breaks)) / max(total - squeezed, 1e-9)

    def x(self, t: float) -> float:
        t = min(max(t, self.t0), self.t1)
        x, at = self.left, self.t0
        for a, b in self.breaks:
            if t <= a:
                break
            if t < b:  # inside a break: placed in proportion across its width
                return x + (a - at) * self.rate + (t - a) / (b - a) * BREAK
            x += (a - at) * self.rate + BREAK
            at = b
        return x + (t - at) * self.rate

    def t(self, x: float) -> float:
        """The time at ``x`` (inside a break: its start)."""
        at, here = self.t0, self.left
        for a, b in self.breaks:
            before = here + (a - at) * self.rate
            if x <= before:
                break
            if x < before + BREAK:
                return a
            here, at = before + BREAK, b
        return at + (x - here) / self.rate

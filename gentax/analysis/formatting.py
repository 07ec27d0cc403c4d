"""What every table shares: the ``Table`` record and how its numbers are shown (``number``,
``signed``): a missing number (None or NaN) is ``MISSING`` ("—"), never 0."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

MISSING = "—"


@dataclasses.dataclass
class Table:
    """One table: ``data`` is what the CSV holds (numbers; NaN = missing), ``display`` the
    strings shown in Markdown/LaTeX (None: formatted from ``data``)."""

    name: str
    title: str
    data: pd.DataFrame
    display: pd.DataFrame | None = None
    notes: list[str] = dataclasses.field(default_factory=list)


def number(value, decimals: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return f"{value:.{decimals}f}"


def signed(value) -> str:
    return MISSING if value is None or math.isnan(value) else f"{value:+.1f}"

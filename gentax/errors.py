"""Exceptions that mean "bad input": the CLI prints them as one line and exits with 2."""

from __future__ import annotations

from typing import Iterable


class GentaxError(Exception):
    """A user-facing error: the message names the problem (and the offending key or value)."""


class ConfigError(GentaxError):
    """A configuration value is missing or invalid."""


class KeyProblem(ConfigError):
    """A config key's value (or the key itself) is wrong: ``key`` is its path inside its section
    (``("verl", "rollout")``), ``problem`` what is wrong with it. The message is
    ``"<section> key <path>: <problem>"``; the study config's check re-words it under the key the user
    wrote, with the file that set it (``gentax.study.config``), as the schema's keys are."""

    def __init__(self, section: str, key, problem: str):
        self.section, self.key, self.problem = section, tuple(key), problem
        super().__init__(f"{section} key {'.'.join(map(str, self.key))}: {problem}")


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean X?)`` for the closest of ``choices`` to a misspelled ``word``, else ``""``."""
    import difflib

    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def unknown_key(word: str, known: Iterable[str]) -> str:
    """What an unknown key's error says: the closest valid key and the valid ones (every section alike)."""
    known = [str(k) for k in known]
    return f"unknown key{did_you_mean(word, known)}; valid: {', '.join(known)}"


def number_hint(value: object, *, integer: bool = False) -> str:
    """For a value refused where a number is wanted: why, and how to write it (one rule for every
    config section and job spec). Text that reads as a number is text (a quoted number; YAML 1.1,
    PyYAML and Snakemake, takes ``1e-5`` as text too: a float needs a dot, ``1.0e-5``); for an
    ``integer`` key the hint is the integer itself, and a float is refused too (``8.0``: write 8),
    so ``eval.episodes: 8.0`` and ``rl.group_size: 8.0`` are treated alike. "" when no hint fits."""
    if integer and isinstance(value, float):
        if value.is_integer():
            return f" (an integer takes no decimal point: write {int(value)})"
        return f" ({value!r} is not a whole number)"
    if not isinstance(value, str):
        return ""
    try:
        number = float(value)
    except ValueError:
        return ""
    if integer:
        if not number.is_integer():
            return f" ({value} is not a whole number)"
        return f" (YAML reads {value!r} as text, not a number: write {int(number)}, without quotes)"
    mantissa, _, exponent = value.strip().lower().partition("e")
    if exponent and exponent[0] not in "+-":
        exponent = "+" + exponent  # YAML 1.1 floats need the exponent's sign too
    written = f"{mantissa}{'' if '.' in mantissa else '.0'}e{exponent}" if exponent else repr(number)
    return f" (YAML reads {value} as text, not a number: write {written})"


def is_integer(value: object) -> bool:
    """An integer as every check counts one: an int that is no bool (8.0 is a float: ``number_hint``)."""
    return isinstance(value, int) and not isinstance(value, bool)


def short_reason(message: str, limit: int = 200) -> str:
    """One line that says why something failed, for tables and summaries (the full text, e.g. a
    traceback, belongs in the log once): the last line of a traceback (the exception), else the
    first non-blank line, cut at ``limit`` characters."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    if not lines:
        return ""
    traceback_at = next((i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")), None)
    if traceback_at is not None:
        head = " ".join(lines[:traceback_at]).rstrip(": ")
        tail = next((line for line in reversed(lines[traceback_at:]) if not line.startswith(("File ", "^", "~"))), "")
        line = f"{head}: {tail}" if head else tail
    else:
        line = lines[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def key_problems(given, required, optional=()) -> str | None:
    """What is wrong with the keys of the mapping ``given`` against ``required`` (each must be
    there) and ``optional`` (each may be): "missing key(s) a, b; unknown key(s) c", or None."""
    missing = [key for key in required if key not in given]
    unknown = sorted(set(given) - set(required) - set(optional))
    parts = [f"missing key(s) {', '.join(missing)}" if missing else "",
             f"unknown key(s) {', '.join(unknown)}" if unknown else ""]
    return "; ".join(part for part in parts if part) or None


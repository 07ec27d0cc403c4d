"""Exceptions that mean "bad input": the CLI prints them as one line and exits with 2."""


class GentaxError(Exception):
    """A user-facing error: the message names the problem (and the offending key or value)."""


class ConfigError(GentaxError):
    """A configuration value is missing or invalid."""


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

"""Exceptions that mean "bad input": the CLI prints them as one line and exits with 2."""


class GentaxError(Exception):
    """A user-facing error: the message names the problem (and the offending key or value)."""


class ConfigError(GentaxError):
    """A configuration value is missing or invalid."""


def yaml_number_hint(value: object, *, integer: bool = False) -> str:
    """For a config value that is text but reads as a number: why, and how to write it. A quoted
    number is text; for an ``integer`` key the hint is the integer itself. YAML 1.1 (PyYAML,
    Snakemake) takes ``1e-5`` as a string: a float needs a dot (``1.0e-5``)."""
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


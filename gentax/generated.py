"""Checked-in generated files: one command writes them, CI compares them.

``write_or_check(argv, build, ...)`` is a generator script's command line (scripts/resolved_defaults.py,
scripts/config_readme.py): ``--write`` writes each file ``build()`` returns (``{path: text}``)
atomically; ``--check`` writes nothing and exits 1 naming each file that differs and the command
that regenerates them; a ``GentaxError`` while building is one line and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from gentax.errors import GentaxError
from gentax.io import REPO_ROOT, write_text


def write_or_check(argv: list[str] | None, build: Callable[[], dict[Path, str]], *, description: str,
                   what: str, source: str, command: str) -> int:
    """``what``: the files in the options' help; ``source``: what they are generated from (the
    message of a difference); ``command``: the generator's command line without ``--write``."""
    parser = argparse.ArgumentParser(description=description)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help=f"regenerate {what}")
    mode.add_argument("--check", action="store_true", help=f"compare {what} with what --write writes from {source}")
    args = parser.parse_args(argv)
    try:
        files = build()
    except GentaxError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 2
    if args.write:
        for path, text in files.items():
            write_text(path, text)
            print(f"wrote {_shown(path)}")
        return 0
    stale = [_shown(path) for path, text in files.items() if not path.is_file() or path.read_text() != text]
    if stale:
        print(f"{', '.join(stale)}: not what `{command} --write` writes from {source}; run it", file=sys.stderr)
        return 1
    print(f"identical: {', '.join(_shown(path) for path in files)}")
    return 0


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)

"""The ``gentax`` command line.

Each stage owns its subcommands: a module listed in ``COMMAND_MODULES`` exposes
``register(subparsers)``, which adds its parsers and sets ``func`` (called with the parsed
namespace; its return value is the exit code). Modules are imported only when the command line
is built, and heavy imports (torch, verl) stay inside the ``func`` bodies so ``gentax --help``
is fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from gentax.errors import GentaxError

COMMAND_MODULES = [
    "gentax.study.cli",
    "gentax.domains.cli",
    "gentax.agent.cli",
    "gentax.analysis.cli",
    "gentax.rollout.cli",
    "gentax.train.cli",
    "gentax.train.sft_cli",
]


class _Version(argparse.Action):
    """``--version``: gentax's version and the commit of the checkout it runs from (a clone runs its own)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print the version, the checkout and its commit; exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from gentax.provenance import PACKAGE_ROOT, code_version

        code = code_version()
        commit = f"commit {code['commit'][:12]}{' + local changes' if code['dirty'] else ''}" if code["commit"] \
            else "not a git checkout"
        print(f"gentax {code['version']} from {PACKAGE_ROOT} ({commit})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gentax", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from gentax import joblog, malloc

    argv = sys.argv[1:] if argv is None else list(argv)
    malloc.tune()  # before torch allocates: freed tensor memory stays in the process (gentax/malloc.py)
    try:
        log = joblog.option(argv)
        if log:  # first: the log holds everything this attempt says (gentax.joblog)
            joblog.attach(log, " ".join(["gentax", *argv[: argv.index("--job")]] if "--job" in argv else
                                        ["gentax", *argv[:2]]))
        # building the parser may read the domain registry (a command's choices; GENTAX_DOMAINS)
        args = build_parser().parse_args(argv)
        if getattr(args, "study_command", None):
            args.study_defaults = _study_defaults(args)
        return int(args.func(args) or 0)
    except GentaxError as exc:  # one clear line, no traceback, for bad input
        print(f"gentax: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a write the machine refused outside an atomic write (which says it itself)
        failure = _refused_write(exc)
        if failure is None:
            raise
        print(f"gentax: error: {failure}", file=sys.stderr)
        return 2


def _study_defaults(args: argparse.Namespace):
    """``args.study_defaults()`` of a command that declared them (``gentax.jobspec.add_study_arguments``):
    its defaults from the study config of its preset option and ``--study-config``
    (``gentax.study.jobs.command_line_defaults``: what its workflow job would receive), resolved at the
    first call. A user's ``--study-config`` files are checked; the shipped presets alone are not
    re-checked (CI does)."""
    import functools

    @functools.cache
    def resolve() -> dict:
        from gentax.study.config import study_config  # the study layer, above every command
        from gentax.study.jobs import command_line_defaults

        cfg = study_config(args.study_preset, args.study_config, check=bool(args.study_config))
        return command_line_defaults(cfg)[args.study_command]

    return resolve


def _refused_write(exc: OSError) -> GentaxError | None:
    """``gentax.io.write_failure``'s line for an OSError that is a refused write; None for any other.
    A full disk or a read-only filesystem is always a write's; a denied access only when it names a
    file, and not a readable existing one it could not open for reading (nor a process: os.kill)."""
    import errno

    from gentax.io import write_failure

    if exc.errno in (errno.EACCES, errno.EPERM):
        named = exc.filename
        if not named or (os.path.isfile(named) and not os.access(named, os.R_OK)):
            return None
    return write_failure(exc.filename or os.getcwd(), exc, "" if exc.filename else "a file the error does not name")

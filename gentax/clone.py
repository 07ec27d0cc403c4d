"""Each clone runs its own code: the shared venvs hold third-party packages only (scripts/setup.sh),
so whatever starts gentax puts its clone first. ``use_this_clone()`` does it for the processes
this one starts (the Snakefile calls it: every job, local or SLURM, whose sbatch exports this
environment, runs the clone's ``bin/gentax`` and imports the clone's package)."""

from __future__ import annotations

import os
from pathlib import Path


def use_this_clone(root: str | os.PathLike = Path(__file__).resolve().parents[1]) -> None:
    """Put ``root/bin`` first on PATH and ``root`` first on PYTHONPATH of this process's environment
    (default: the clone of this package)."""
    root = str(Path(root).resolve())
    for var, entry in (("PATH", os.path.join(root, "bin")), ("PYTHONPATH", root)):
        rest = [p for p in os.environ.get(var, "").split(os.pathsep) if p and p != entry]
        os.environ[var] = os.pathsep.join([entry, *rest])


#: What `bash scripts/run.sh` gives snakemake when you give no --profile: the embedded study's.
DEFAULT_PROFILE = "profiles/embedded"


def _values(args: list[str], *flags: str, many: bool = False) -> list[str]:
    """The values of ``flags`` in a snakemake command line (``--flag V``, ``--flag=V``; with
    ``many`` every word up to the next option, as Snakemake reads ``--configfile A B``)."""
    out: list[str] = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name not in flags:
            continue
        if eq:
            out.append(value)
            continue
        for word in args[i + 1:]:
            if word.startswith("-"):
                break
            out.append(word)
            if not many:
                break
    return out


def _profile_config(name: str) -> list[str]:
    """The ``config:`` entries of a Snakemake profile (a folder, or a name Snakemake looks up)."""
    import yaml

    for folder in (Path(name), Path.home() / ".config" / "snakemake" / name, Path("/etc/xdg/snakemake") / name):
        if (folder / "config.yaml").is_file():
            entries = (yaml.safe_load((folder / "config.yaml").read_text()) or {}).get("config") or []
            return [str(e) for e in ([entries] if isinstance(entries, str) else entries)]
    return []


def snakemake_argv(args: list[str]) -> list[str]:
    """The snakemake command line `bash scripts/run.sh ARGS` runs: ``DEFAULT_PROFILE`` unless a
    profile is given; every --configfile read first (``gentax.study.config.check_configfiles``: one
    Snakemake cannot read is named); and a profile's ``config:`` entries (profiles/slurm's
    preset=paper) kept under a ``--config`` of the command line, which in Snakemake replaces them."""
    from gentax.study.config import check_configfiles

    args = list(args)
    profiles = _values(args, "--profile")
    if not profiles and not _values(args, "--workflow-profile"):
        args = ["--profile", DEFAULT_PROFILE, *args]
    check_configfiles(_values(args, "--configfile", "--configfiles", many=True))
    if "--config" in args:
        at = args.index("--config") + 1
        args[at:at] = [entry for name in profiles for entry in _profile_config(name)]  # the user's, later, win
    return args


if __name__ == "__main__":  # scripts/run.sh: the snakemake arguments, NUL-separated
    import sys

    from gentax.errors import ConfigError

    try:
        sys.stdout.write("".join(f"{arg}\0" for arg in snakemake_argv(sys.argv[1:])))
    except ConfigError as exc:
        sys.exit(f"gentax: error: {exc}")

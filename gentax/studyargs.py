"""The options that pick the study a command line's defaults come from: ``--preset``, ``--study-config``.

A command whose options default to study values (``gentax eval``, ``properties``, ``tables``,
``train rl``, ``sft build-data``, ``sft train``, ``augment preview``) calls ``add_arguments(parser, command)``. The
command line's boundary (``gentax.cli.main``) then gives it ``args.study_defaults()``: the study
config of the preset, resolved and validated once (``gentax.study.config.study_config``), as that
command's defaults (``gentax.study.config.command_line_defaults``). It is resolved at the first
call only, so a command given every value, or a job spec, reads no config; no module below the
study layer reads the workflow's config file. ``gentax sft`` spells the study's preset
``--study-preset``: its ``--preset`` names the SFT stage (v2 | embedded-base), as its job specs do.
"""

from __future__ import annotations


def add_arguments(parser, command: str, *, preset_option: str = "--preset") -> None:
    """``preset_option`` (the study's preset, read as ``args.study_preset``) and ``--study-config``
    on ``parser``, whose study defaults are ``command``'s."""
    parser.add_argument(preset_option, dest="study_preset", default=None,
                        help="the study whose values the options left out default to: paper (config/config.yaml as it "
                             "is; the default), embedded, gpu1 (config/resolved/<preset>.yaml lists them)")
    parser.add_argument("--study-config", action="append", default=[], metavar="FILE",
                        help="a config file laid over the preset's study, as `snakemake --configfile` (repeatable)")
    parser.set_defaults(study_command=command)

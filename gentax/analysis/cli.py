"""``gentax tables``: every table, statistic and figure from a success summary.

    gentax tables --summary S --properties P --out DIR [--window 105,120,135,150]
                  [--bootstrap N] [--seed S] [--no-figures] [...]

Everything is built in a temporary folder and then moved to DIR (nothing half-written); DIR
must be absent, empty or an earlier output of this command. See ``docs/tables.md``.
"""

from __future__ import annotations

import argparse
import time

from gentax.errors import GentaxError


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one step")
    return values


def _name_list(text: str) -> tuple[str, ...]:
    values = tuple(part.strip().lower() for part in text.split(",") if part.strip())
    if not values:
        raise argparse.ArgumentTypeError("expected at least one name")
    return values


def _decimals(text: str) -> int | None:
    if text.lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'none', got {text!r}") from None


def register(subparsers) -> None:
    from gentax.analysis.summary import DEFAULT_WINDOW

    parser = subparsers.add_parser(
        "tables", help="write the study's tables, statistics and figures from a success summary",
        description="Write every table (CSV, Markdown, LaTeX), bootstrap statistic and figure of the "
                    "study from a long-format success summary; see docs/tables.md.",
    )
    parser.add_argument("--summary", required=True, help="success summary, long format (.csv or .parquet)")
    parser.add_argument("--properties", help="environment properties (.csv or .parquet); optional")
    parser.add_argument("--controls", help="the controls' properties, one row per level (.csv or .parquet; "
                                           "gentax.analysis.controls); optional: adds the controls' tables and figure")
    parser.add_argument("--out", required=True, help="output folder (replaced as a whole)")
    parser.add_argument("--window", type=_int_list, default=",".join(map(str, DEFAULT_WINDOW)),
                        help="checkpoint steps averaged per seed (default: %(default)s)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap draws (0: none; default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    parser.add_argument("--no-figures", action="store_true", help="skip the figures")
    parser.add_argument("--rank-decimals", type=_decimals, default=1,
                        help="round success to this many decimals before ranking ('none': no rounding; default 1)")
    parser.add_argument("--tie-points", type=float, default=0.5,
                        help="a domain less than this many points below the one before shares its rank (default 0.5)")
    parser.add_argument("--aug-variants", type=_name_list, default=("aug",),
                        help="variants reported as augmentation in Table 5 (comma-separated; default aug)")
    parser.add_argument("--nothink-variant", default="nothink", help="the thinking-off variant (default nothink)")
    parser.add_argument("--filler-variant", default="filler",
                        help="the filler-thinking variant: Table 7 rows where the summary has it (default filler)")
    parser.add_argument("--delta-id-base", choices=("matching", "default"), default="matching",
                        help="initial-policy row for a variant's ΔID: the base row of the same variant when "
                             "present ('matching', default) or always the default base row")
    parser.add_argument("--error-mark-pct", type=float, default=5.0,
                        help="mark Table 2 cells whose episodes ended with an env error more often than this (percent; default 5)")
    parser.add_argument("--test-level", type=float, default=None,
                        help="level of the exact paired tests: a cell is resolved when its Holm-adjusted p is below it "
                             "(default: the repository config's eval.test_level)")
    parser.add_argument("--sft-mix", type=_name_list, default=None,
                        help="domains in V2's SFT mix, Table 6's in_v2_sft_mix (comma-separated; default: the "
                             "repository config's inits.v2.sft.mix, weights > 0)")
    parser.set_defaults(func=run)


def _config_defaults() -> tuple[float, tuple[str, ...]]:
    """eval.test_level and the V2 SFT mix's domains of the repository's config.yaml."""
    from gentax.analysis.summary import sft_mix_domains
    from gentax.io import read_yaml
    from gentax.plan_cli import DEFAULT_CONFIG

    cfg = read_yaml(DEFAULT_CONFIG)
    return float(cfg["eval"]["test_level"]), sft_mix_domains(cfg["inits"]["v2"]["sft"]["mix"])


def run(args) -> int:
    from gentax.analysis.tables import build_all

    if args.bootstrap < 0:
        raise GentaxError(f"--bootstrap must be >= 0, got {args.bootstrap}")
    started = time.perf_counter()
    test_level, sft_mix = _config_defaults()
    analysis = build_all(
        args.summary, args.properties, args.out, window=args.window, n_boot=args.bootstrap,
        seed=args.seed, figures=not args.no_figures, rank_decimals=args.rank_decimals,
        tie_points=args.tie_points, aug_variants=args.aug_variants,
        nothink_variant=args.nothink_variant.strip().lower(), filler_variant=args.filler_variant.strip().lower(),
        delta_id_base=args.delta_id_base,
        error_mark_pct=args.error_mark_pct, controls=args.controls,
        test_level=test_level if args.test_level is None else args.test_level,
        sft_mix=sft_mix if args.sft_mix is None else args.sft_mix,
    )
    print(f"wrote {len(analysis.tables)} tables to {args.out} "
          f"from {len(analysis.summary)} summary rows in {time.perf_counter() - started:.1f} s")
    return 0

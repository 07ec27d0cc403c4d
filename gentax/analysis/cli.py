"""``gentax tables``: every table, statistic and figure from a success summary, written to DIR
atomically (DIR absent, empty or an earlier output; docs/tables.md); and the workflow's bookkeeping
verbs (``summarize``, ``table``, ``figure``, ``properties-table``), each run on a job spec
(``gentax.analysis.jobs``)."""

from __future__ import annotations

import argparse
import time

from gentax import jobspec
from gentax.analysis.jobs import KINDS
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
    parser = subparsers.add_parser(
        "tables", help="write the study's tables, statistics and figures from a success summary",
        description="Write every table (CSV, Markdown, LaTeX), bootstrap statistic and figure of the "
                    "study from a long-format success summary; see docs/tables.md.")
    parser.add_argument("--summary", required=True, help="success summary, long format (.csv or .parquet)")
    parser.add_argument("--properties", help="environment properties (.csv or .parquet); optional")
    parser.add_argument("--controls", help="the controls' properties, one row per level (.csv or .parquet; "
                                           "gentax.analysis.controls); optional: adds the controls' tables and figure")
    parser.add_argument("--out", required=True, help="output folder (replaced as a whole)")
    jobspec.add_study_arguments(parser, "tables")
    parser.add_argument("--window", type=_int_list, default=None,
                        help="checkpoint steps averaged per seed (default: the study's last eval.window checkpoints, "
                             "every rl.save_every steps up to grid.steps: 105,120,135,150 for the paper)")
    parser.add_argument("--bootstrap", type=int, default=None,
                        help="bootstrap draws (0: none; default: the study's eval.bootstrap, 1000 for the paper)")
    parser.add_argument("--seed", type=int, default=None, help="bootstrap seed (default: the study's seed)")
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
    parser.add_argument("--error-mark-pct", type=float, default=None,
                        help="mark Table 2 cells whose episodes ended with an env error more often than this "
                             "(percent; default: the study's eval.error_mark_pct)")
    parser.add_argument("--test-level", type=float, default=None,
                        help="level of the tables' rule (task-paired exact test AND seed-level test, Holm over a "
                             "table's cells): a cell is resolved when its Holm-adjusted p is <= it "
                             "(default: the study's eval.test_level)")
    parser.add_argument("--sft-mix", type=_name_list, default=None,
                        help="domains in V2's SFT mix, Table 6's in_v2_sft_mix (comma-separated; default: the "
                             "study's inits.v2.sft.mix, weights > 0)")
    parser.add_argument("--init-domains", type=_per_init, action="append", default=[], metavar="INIT=DOMAINS",
                        help="an init's training and evaluation domains, e.g. v1=alfworld,webshop,sokoban (repeat "
                             "per init; default: the study's inits.<init>.domains); rows of an init on "
                             "another domain are left out with a note")
    parser.add_argument("--augmented", type=_per_init, action="append", default=[], metavar="INIT=DOMAINS",
                        help="an init's augmented training domains, Table 5's rows beyond the summary's (repeat per "
                             "init; default: the study's augmentation.<init>.eps > 0)")
    parser.set_defaults(func=run)
    _register_jobs(subparsers)


def _register_jobs(subparsers) -> None:
    """The workflow's bookkeeping steps, one verb each, run on a job spec (gentax.analysis.jobs)."""
    for verb, what in (("summarize", "one run's (or initial policy's) evaluations as long-format success rows"),
                       ("table", "one table of the study from the run summaries it reads"),
                       ("figure", "one figure of the study from the run summaries it reads"),
                       ("properties-table", "one row per domain from the property logs")):
        p = subparsers.add_parser(verb, help=what, description=what + " (a workflow job: --job SPEC).")
        jobspec.add_arguments(p, required=True)
        p.set_defaults(func=_job, verb=verb)


def _job(args) -> int:
    spec = jobspec.take(KINDS[args.verb], args)
    if spec is not None:
        spec.run()
    return 0


def _per_init(text: str) -> tuple[str, tuple[str, ...]]:
    init, sep, domains = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected INIT=DOMAIN,DOMAIN,..., got {text!r}")
    return init.strip().lower(), tuple(d.strip().lower() for d in domains.split(",") if d.strip())


def run(args) -> int:
    from gentax.analysis.tables import build_all, study_options  # function-local: defers pandas until a command runs

    if args.bootstrap is not None and args.bootstrap < 0:
        raise GentaxError(f"--bootstrap must be >= 0, got {args.bootstrap}")
    started = time.perf_counter()
    defaults = args.study_defaults()  # what a table job of the study receives (gentax.study.plan.table_settings)
    given = {"window": args.window, "bootstrap": args.bootstrap, "seed": args.seed,
             "error_mark_pct": args.error_mark_pct, "test_level": args.test_level, "sft_mix": args.sft_mix}
    study = {**defaults, **{key: value for key, value in given.items() if value is not None},
             "init_domains": {**defaults["init_domains"], **dict(args.init_domains)},
             "augmented": {**defaults["augmented"], **dict(args.augmented)}}
    analysis = build_all(args.summary, args.properties, args.out, figures=not args.no_figures, controls=args.controls,
                         rank_decimals=args.rank_decimals, tie_points=args.tie_points, aug_variants=args.aug_variants,
                         nothink_variant=args.nothink_variant.strip().lower(),
                         filler_variant=args.filler_variant.strip().lower(), delta_id_base=args.delta_id_base,
                         **study_options(study))
    print(f"wrote {len(analysis.tables)} tables to {args.out} "
          f"from {len(analysis.summary)} summary rows in {time.perf_counter() - started:.1f} s")
    return 0

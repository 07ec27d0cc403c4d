"""A toy table declared in ONE module outside gentax/analysis/ (tests/test_toy_domain.py), registered
the documented way: ``GENTAX_ARTIFACTS=toy_table`` with this folder on the Python path
(gentax/analysis/artifacts.py). The table: each training domain's best ID success over the
variants it reads; its rule is said to test ΔID, so the power preview prices it."""

from __future__ import annotations

from gentax.analysis.artifacts import Artifact, Tested
from gentax.analysis.formatting import Table


def build(analysis, name):
    """The builder, over the analysis's shared cell means: one row per training domain."""
    success = analysis.values.success.reset_index()
    trained = success[success["train_domain"] == success["eval_domain"]]
    best = trained.groupby(["init", "train_domain"], as_index=False)["mean_pct"].max()
    return Table(name, "Toy: best ID success per training domain", best)


ARTIFACTS = (Artifact("toy_table", "table", "toy_table:build", variants=("default", "aug"), tests=Tested("ΔID")),)

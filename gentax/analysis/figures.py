"""The registry's figures (``gentax.analysis.artifacts``), each drawn by its builder here,
``(analysis, name) -> Figure``; what each shows: docs/tables.md "Outputs". matplotlib's Agg canvas,
no pyplot global state; PNG and SVG files are deterministic for the same inputs (fixed SVG hash
salt, no dates in metadata; SVG text stays text).
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from gentax.analysis import artifacts
from gentax.analysis.controls import SWEEP_TABLE
from gentax.analysis.summary import BASE, DEFAULT_VARIANT, INITS
from gentax.errors import GentaxError
from gentax.io import atomic_path
_FORMATS = {"png": {"Software": None}, "svg": {"Date": None}}
_MARKERS = {"v1": "o", "v2": "s"}
_INIT_COLOURS = {"v1": "tab:blue", "v2": "tab:orange"}


def __getattr__(name: str):
    if name == "FIGURE_NAMES":  # derived from the registry (gentax.analysis.artifacts)
        return artifacts.names("figure")
    raise AttributeError(name)


def _new_figure(width: float, height: float, **margins) -> Figure:
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    # Fixed margins instead of tight_layout, which costs a second full text layout per figure.
    fig.subplots_adjust(**{"left": 0.1, "right": 0.97, "top": 0.9, "bottom": 0.12, **margins})
    return fig


def save(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` atomically; the format follows the suffix (.png or .svg)."""
    path = Path(path)
    ext = path.suffix.lstrip(".").lower()
    with matplotlib.rc_context({"svg.hashsalt": "gentax", "svg.fonttype": "none"}), atomic_path(path) as tmp:
        fig.savefig(tmp, format=ext, metadata=_FORMATS[ext])
    return path


def _no_data(ax, text: str = "no data") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="grey")


def ood_vs_properties(analysis, name: str = "ood_vs_properties") -> Figure:
    fig = _new_figure(10.0, 4.0, left=0.07, wspace=0.25)
    properties, values = analysis.properties, analysis.values
    units = {"richness": "state richness (characters per state)", "complexity": "planning complexity (steps)"}
    for ax, prop in zip(fig.subplots(1, 2), units):
        plotted = 0
        for init in INITS:
            points = []
            for train in analysis.settings.domains(init):
                ood = list(values.ood(init, train).values())
                if properties is None or prop not in properties.columns or train not in properties.index:
                    continue
                x = float(properties.at[train, prop])
                if ood and not any(math.isnan(v) for v in ood) and not math.isnan(x):
                    points.append((x, float(np.mean(ood)), train))
            if points:
                xs, ys, names = zip(*points)
                ax.scatter(xs, ys, marker=_MARKERS[init], color=_INIT_COLOURS[init], label=init.upper())
                for x, y, name in points:
                    ax.annotate(name, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
                plotted += len(points)
        ax.margins(x=0.15, y=0.1)  # room for the domain labels
        ax.set_xlabel(units[prop])
        ax.set_ylabel("mean OOD success (%)")
        ax.set_title(f"OOD success vs {prop} of the training domain", fontsize=10)
        if plotted:
            ax.legend(fontsize=8)
        else:
            _no_data(ax)
    return fig


def delta_ood_bars(table, title: str) -> Figure:
    """The ΔOOD bars of Table 5 or 7 where the row's variant was trained: each labelled with its value, undefined
    is no bar, labelled "n/a"; with several variants (Table 7's nothink and filler rows) each bar is labelled with
    its variant and hatched by it."""
    data = table.data
    if not data.empty:  # a row whose variant no run of this study trains: left out, not drawn as n/a
        data = data[data.apply(lambda row: row.get(f"delta_id_{row['variant']}"), axis=1).notna()]
    fig = _new_figure(max(5.5, 0.6 * len(data) + 2), 4.5, left=0.13, bottom=0.22)
    ax = fig.add_subplot()
    ax.set_title(title)
    if data.empty:
        _no_data(ax)
        return fig
    several_variants = data["variant"].nunique() > 1
    labels = [f"{r.init.upper()} {r.train_domain}" + (f" ({r.variant})" if several_variants else "")
              for r in data.itertuples()]
    heights = data["delta_ood_pct"].to_numpy(dtype=float)
    positions = np.arange(len(data))
    hatches = {v: h for v, h in zip(dict.fromkeys(data["variant"]), ("", "//", "..", "xx"))}
    bars = ax.bar(positions, np.nan_to_num(heights), color=[_INIT_COLOURS[init] for init in data["init"]])
    for bar, variant in zip(bars, data["variant"]):
        bar.set_hatch(hatches.get(variant, ""))
    _bar_labels(ax, positions, heights, labels)
    return fig


def _bar_labels(ax, positions, heights, labels) -> None:
    """"n/a" where a bar is undefined, the zero line, the bars' labels and the ΔOOD axis."""
    for x, h in zip(positions, heights):  # the value on every bar: a 0.0 bar is otherwise not seen
        ax.text(x, 0 if math.isnan(h) else h, "n/a" if math.isnan(h) else f"{h:+.1f}", ha="center",
                va="top" if h < 0 else "bottom", fontsize=8, color="grey")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(positions, labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("ΔOOD (%)")


def delta_ood_augmentation(analysis, name: str = "delta_ood_augmentation") -> Figure:
    return delta_ood_bars(analysis.table("table5_augmentation"), "ΔOOD of state augmentation")


def delta_ood_thinking(analysis, name: str = "delta_ood_thinking") -> Figure:
    return delta_ood_bars(analysis.table("table7_thinking"), "ΔOOD of thinking off (and of filler thinking)")


def mixture_delta_ood(analysis, name: str = "mixture_delta_ood") -> Figure:
    """The ``mixture_ood`` table's bars, one group per mixture (init, mixture, variant): the mixture
    run first (hatched), then each member's own run; error bars = the 95% interval where there is one."""
    data = analysis.table("mixture_ood").data
    fig = _new_figure(max(5.5, 0.55 * len(data) + 2.5), 4.5, left=0.12, bottom=0.3)
    ax = fig.add_subplot()
    ax.set_title("Training on a mixture: ΔOOD over the domains outside it")
    if data.empty:
        _no_data(ax)
        return fig
    positions, x = [], 0.0
    for _, group in data.groupby(["init", "mixture", "variant"], sort=False):
        positions += [x + i for i in range(len(group))]
        x += len(group) + 0.8  # a gap between mixtures
    heights = data["delta_ood_pct"].to_numpy(dtype=float)
    low = data["delta_ood_ci_low_pct"].to_numpy(dtype=float)
    high = data["delta_ood_ci_high_pct"].to_numpy(dtype=float)
    is_mixture = (data["run"] == data["mixture"]).to_numpy()
    bars = ax.bar(positions, np.nan_to_num(heights), color=[_INIT_COLOURS.get(i, "grey") for i in data["init"]])
    for bar, mixed in zip(bars, is_mixture):
        if mixed:
            bar.set_hatch("//")
            bar.set_edgecolor("black")
    with np.errstate(invalid="ignore"):
        errors = np.array([np.where(np.isnan(low), 0, heights - low), np.where(np.isnan(high), 0, high - heights)])
    ax.errorbar(positions, np.nan_to_num(heights), yerr=np.nan_to_num(np.clip(errors, 0, None)), fmt="none",
                ecolor="black", capsize=3, linewidth=0.8)
    several_variants = data["variant"].nunique() > 1
    labels = [f"{r.init.upper()} {r.run}" + (f" ({r.variant})" if several_variants else "") for r in data.itertuples()]
    _bar_labels(ax, positions, heights, labels)
    ax.legend(handles=[Patch(facecolor="white", edgecolor="black", hatch="//", label="mixture run"),
                       Patch(facecolor="white", edgecolor="black", label="member's own run")], fontsize=8)
    return fig


def training_curves(analysis, name: str = "training_curves") -> Figure:
    """One panel per initial policy and training domain with runs: each variant's per-step training
    metrics (``analysis.training``, the mean over seeds: success and invalid rate of the step's own
    rollouts in %, its mean return on the right axis) and, on top, its evaluations (ID success and the
    OOD domains' mean at each evaluated checkpoint). A panel with neither is left out."""
    summary, window, training = analysis.summary, analysis.settings.window, analysis.training
    trained = summary[summary["train_domain"] != BASE]
    variants = sorted(set(trained["variant"]) | (set(training["variant"]) if training is not None else set()),
                      key=lambda v: (v != DEFAULT_VARIANT, v))
    colours = {v: f"C{i}" for i, v in enumerate(variants)}
    with_runs = set(zip(trained["init"], trained["train_domain"]))
    if training is not None:
        with_runs |= set(zip(training["init"], training["train_domain"]))
    panels = [(init, train) for init in INITS for train in analysis.settings.domains(init) if (init, train) in with_runs]
    columns = max(1, min(4, len(panels)))
    rows = max(1, math.ceil(len(panels) / columns))
    fig = _new_figure(4.6 * columns, 3.3 * rows + 0.6, left=0.06, right=0.94, top=1 - 0.7 / (3.3 * rows + 0.6),
                      bottom=0.1, hspace=0.5, wspace=0.55)
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax in axes[len(panels):]:
        ax.set_axis_off()  # the grid's spare cells
    if not panels:
        _no_data(axes[0], "no trained runs")
    drawn, returns = set(), False
    for ax, (init, train) in zip(axes, panels):
        returns_ax, lines = None, 0
        for variant in variants:
            colour, before = colours[variant], lines
            if training is not None:
                steps = training[(training["init"] == init) & (training["train_domain"] == train)
                                 & (training["variant"] == variant)].groupby("step").mean(numeric_only=True)
                if len(steps):
                    ax.plot(steps.index, steps["success"] * 100.0, color=colour, linewidth=1)
                    ax.plot(steps.index, steps["invalid_rate"] * 100.0, color=colour, linewidth=1, linestyle=":")
                    if steps["return"].notna().any():
                        returns_ax = returns_ax or ax.twinx()
                        returns_ax.plot(steps.index, steps["return"], color=colour, linewidth=0.8, alpha=0.5,
                                        linestyle="-.")
                    lines += 1
            run = trained[(trained["init"] == init) & (trained["train_domain"] == train)
                          & (trained["variant"] == variant)]
            if len(run):
                evals = run.groupby(["step", "eval_domain"])["success"].mean().unstack("eval_domain") * 100.0
                if train in evals.columns:
                    ax.plot(evals.index, evals[train], color=colour, marker="o", linestyle="none")
                ood = [d for d in analysis.settings.domains(init) if d != train and d in evals.columns]
                if ood:
                    ax.plot(evals.index, evals[ood].mean(axis=1), color=colour, marker="x", linestyle="none")
                lines += 1
            if lines > before:
                drawn.add(variant)
        ax.set_title(f"{init.upper()} {train}", fontsize=10)
        ax.axvspan(min(window), max(window), color="grey", alpha=0.15)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("training step", fontsize=8)
        ax.set_ylabel("success, invalid actions (%)", fontsize=8)
        if returns_ax is not None:
            returns_ax.set_ylabel("mean return per episode", fontsize=8)
            returns = True
    handles = [Line2D([], [], color=colours[v], label=v) for v in variants if v in drawn]
    handles += [Line2D([], [], color="black", label="training success"),
                Line2D([], [], color="black", linestyle=":", label="training invalid rate")]
    if returns:
        handles.append(Line2D([], [], color="black", linestyle="-.", alpha=0.5, label="training return (right)"))
    handles += [Line2D([], [], color="black", marker="o", linestyle="none", label="eval ID"),
                Line2D([], [], color="black", marker="x", linestyle="none", label="eval OOD mean"),
                Patch(color="grey", alpha=0.15, label="window")]
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=8, frameon=False)
    return fig


def controls_delta_ood(analysis, name: str = "controls_delta_ood") -> Figure:
    data = analysis.table(SWEEP_TABLE).data
    fig = _new_figure(10.0, 4.2, left=0.08, wspace=0.25, bottom=0.2)
    panels = (("difficulty", "complexity", "measured planning complexity (mean steps, failures = T_max)",
               "difficulty sweep: ΔOOD vs planning complexity"),
              ("richness", "richness_chars", "measured state richness (mean characters per state)",
               "richness sweep: ΔOOD vs state richness"))
    for ax, (control, column, xlabel, title) in zip(fig.subplots(1, 2), panels):
        rows = data[data["control"] == control]
        drawn = rows[rows["delta_ood_pct"].notna() & rows[column].notna()]
        undefined = [r.level for r in rows.itertuples() if r.level not in set(drawn["level"])]
        if len(drawn):
            y = drawn["delta_ood_pct"].to_numpy(dtype=float)
            low, high = drawn["delta_ood_ci_low"].to_numpy(dtype=float), drawn["delta_ood_ci_high"].to_numpy(dtype=float)
            errors = np.vstack([np.nan_to_num(y - low), np.nan_to_num(high - y)])  # no interval: no bar
            ax.errorbar(drawn[column], y, yerr=errors, fmt="o-", capsize=3, color=_INIT_COLOURS.get(drawn["init"].iloc[0]))
            for x, value, name in zip(drawn[column], y, drawn["level"]):
                ax.annotate(name, (x, value), textcoords="offset points", xytext=(4, 4), fontsize=8)
            ax.axhline(0, color="black", linewidth=0.8)
            ax.margins(x=0.15, y=0.15)
        else:
            _no_data(ax)
        if undefined:
            ax.text(0.0, -0.22, "n/a (undefined ΔOOD or property): " + ", ".join(undefined), transform=ax.transAxes,
                    fontsize=8, color="grey")
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_ylabel("ΔOOD (%)")
        ax.set_title(title, fontsize=10)
    return fig


def build_figure(name: str, analysis) -> Figure:
    """The registered figure ``name`` drawn from ``analysis``."""
    if artifacts.get(name).kind != "figure":
        raise GentaxError(f"{name!r} is a table, not a figure")
    return artifacts.builder(name)(analysis, name)


def write_all(analysis, folder: Path) -> list[Path]:
    """Draw every registered figure into ``folder`` as ``<name>.png`` and ``<name>.svg`` (the
    mixture figure only when the analysis has mixture runs, like its table; the controls' only
    with the controls' properties)."""
    paths = []
    for name in artifacts.names("figure"):
        if not analysis.present(name):
            continue
        fig = build_figure(name, analysis)
        paths += [save(fig, folder / f"{name}.{ext}") for ext in _FORMATS]
    return paths

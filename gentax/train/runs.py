"""A training run's folder, its step schedule and its metrics log (shared by both engines).

Layout of ``RUN_DIR``::

    run.json                     identity of the run (engine, init, domain, variant, seed) and its recipe (config,
                                 run spec, the init's fingerprint): a run whose recipe changed is stale
    .gentax.lock                 held by the one trainer working on the run (host, pid, since)
    metrics.csv                  one row per trained step (rewritten atomically after every step)
    think_samples/step_<N>.json  thinking runs (local engine): think blocks of step N, the filler arm's source
    checkpoints/step_<N>/        HF model folder (AutoModelForCausalLM + tokenizer load it)
    checkpoints/step_<N>/gentax_state/   the local engine's resume state (optimizer, RNG, step)
    verl/                        the verl engine's own FSDP checkpoints (global_step_<N>/, tracker)
    verl_data/                   the verl engine's task parquets (train.parquet, val.parquet)

Steps are numbered from 1: ``--steps A:B`` trains steps A+1..B from the state after step A. The
task of step k is a pure function of (run seed, k, slot), ``task_seed``, so a resumed or extended
run sees the tasks an uninterrupted run would, whichever engine runs it. A checkpoint is complete
once its folder exists under its final name. Faults (``locked``, ``remove_temporaries``, the row
before the checkpoint: ``MetricsLog``) and disk (``prune_checkpoints``): docs/training.md section 7.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import socket
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from gentax import io as gio
from gentax import provenance
from gentax.agent.parse import REASONS
from gentax.errors import ConfigError
from gentax.io import atomic_path, write_json
from gentax.train import processes

CHECKPOINTS = "checkpoints"
STATE_DIR = "gentax_state"
RUN_FILE = "run.json"
RUN_SPEC_FILE = "run_spec.json"  # the run spec its segments were trained with (written by each segment job)
METRICS_FILE = "metrics.csv"
LOCK_FILE = ".gentax.lock"
THINK_SAMPLES = "think_samples"
VERL_DATA = "verl_data"
VERL_DIR = "verl"  # the verl engine's FSDP checkpoints: its resume state
PRUNED = ".removing"  # a checkpoint being deleted is renamed to .<name>.removing first: never half a checkpoint
THINK_SAMPLES_KEPT = 64
#: checkpoints that keep their resume state: the newest, and one to fall back to if it is corrupt
STATES_KEPT = 2
#: the folders of a run that the trainer writes with atomic writes ("": the run folder itself)
ATOMIC_FOLDERS = ("", CHECKPOINTS, THINK_SAMPLES, VERL_DATA)
#: metrics.csv column: mean think-block tokens of a step's samples (the filler arm's count)
THINK_TOKENS_MEAN = "think_tokens_mean"
_STEP_DIR = re.compile(r"^step_(\d+)$")
#: run.json keys that must not change when a run is resumed or extended
IDENTITY_KEYS = ("engine", "init", "domain", "variant", "seed")


def metrics_beside(segment_record: str | Path) -> Path:
    """The run's ``metrics.csv`` beside one of its segment records (both in the run folder)."""
    return Path(segment_record).parent / METRICS_FILE


def task_seed(run_seed: int, step: int, slot: int) -> int:
    """The task (env seed) of group ``slot`` at training step ``step`` (1-based) of a run."""
    return int(np.random.SeedSequence([int(run_seed), int(step), int(slot)]).generate_state(1)[0] % (2**31 - 1))


def step_task_seeds(run_seed: int, step: int, tasks_per_step: int) -> list[int]:
    return [task_seed(run_seed, step, slot) for slot in range(tasks_per_step)]


def step_task_domains(run_seed: int, step: int, tasks_per_step: int, weights: dict[str, int]) -> list[str]:
    """The domain of each task of a step of a run on a mixture (``weights``: domain -> weight): each
    domain gets its whole share ``floor(tasks * w / W)``, the tasks left over are drawn by weight
    without replacement (seeded), so over the run every domain is trained on in proportion. In the
    weights' order."""
    names = list(weights)
    shares = np.array([weights[n] for n in names], dtype=float)
    shares /= shares.sum()
    counts = np.floor(shares * tasks_per_step).astype(int)
    left = tasks_per_step - int(counts.sum())
    if left:
        rng = np.random.default_rng([int(run_seed), int(step), 0x6D6978])  # "mix"
        counts[rng.choice(len(names), size=left, replace=False, p=shares)] += 1
    return [name for name, count in zip(names, counts) for _ in range(count)]


def saved_steps(start: int, end: int, save_every: int) -> list[int]:
    """The checkpoints a segment that trains steps ``start+1..end`` saves: every ``save_every``-th
    step, and its last."""
    return [step for step in range(start + 1, end + 1) if step % save_every == 0 or step == end]


def checkpoint_dir(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / CHECKPOINTS / f"step_{step}"


def checkpoint_steps(run_dir: str | Path) -> list[int]:
    """Steps with a complete checkpoint folder, ascending."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    return sorted(int(m.group(1)) for p in root.iterdir() if p.is_dir() and (m := _STEP_DIR.match(p.name)))


def checkpoint_problem(run_dir: str | Path, step: int, state: bool = False) -> str | None:
    """What is wrong with checkpoint ``step`` (a file that differs from the folder's manifest, or
    with ``state`` a missing or damaged resume state); None: intact."""
    folder = checkpoint_dir(run_dir, step)
    problem = gio.manifest_problem(folder)
    if problem or not state:
        return problem
    if not (folder / STATE_DIR / "state.json").is_file():
        return (f"{folder / STATE_DIR}: no resume state (only the newest {STATES_KEPT} checkpoints keep one; with "
                "disk.keep_checkpoints: evaluated none once the run's last planned segment has ended: to train "
                "it further, delete the run folder and train it again)")
    return gio.manifest_problem(folder / STATE_DIR)


def finished(run_dir: str | Path, end: int) -> bool:
    """Whether a segment ending at ``end`` is done although its last checkpoint has no resume state
    (``prune_checkpoints`` dropped it when the segment ended): its weights are intact."""
    folder = checkpoint_dir(run_dir, end)
    return folder.is_dir() and not (folder / STATE_DIR).exists() and checkpoint_problem(run_dir, end) is None


def prune_checkpoints(run_dir: str | Path, keep: Iterable[int], *, upto: int, states: int) -> list[Path]:
    """Of the checkpoints at or before step ``upto`` (a later segment's are its own), keep the newest
    ``states`` whole (weights and resume state) and, of the others, the weights of the steps in
    ``keep`` without their resume state; delete the rest. With ``states`` 0 the verl engine's FSDP
    checkpoints (``VERL_DIR``) go too. Returns what it deleted."""
    run_dir, keep = Path(run_dir), set(keep)
    for leftover in (run_dir / CHECKPOINTS).glob(f".*{PRUNED}"):  # a kill during an earlier deletion
        shutil.rmtree(leftover, ignore_errors=True)
    steps = [step for step in checkpoint_steps(run_dir) if step <= upto]
    whole = set(steps[len(steps) - states:]) if states > 0 else set()
    removed = []
    for step in steps:
        folder = checkpoint_dir(run_dir, step)
        if step in whole:
            continue
        if step in keep:
            if (folder / STATE_DIR).exists():
                shutil.rmtree(folder / STATE_DIR)
                removed.append(folder / STATE_DIR)
            continue
        doomed = folder.with_name(f".{folder.name}{PRUNED}")
        folder.rename(doomed)  # gone from the checkpoint list at once
        shutil.rmtree(doomed)
        removed.append(folder)
    if states == 0 and (run_dir / VERL_DIR).is_dir():
        shutil.rmtree(run_dir / VERL_DIR)
        removed.append(run_dir / VERL_DIR)
    return removed


def resume_fix(checkpoint: str | Path) -> str:
    """What to do about a checkpoint whose resume state or weights cannot be loaded."""
    return f"delete {checkpoint} and rerun the job: the run resumes from the checkpoint before it"


def intact_checkpoint(run_dir: str | Path, start: int, end: int, state: bool = False) -> list[int]:
    """[the newest checkpoint step in [start, end] that is intact] ([] when none), for
    ``resume_step(..., available=...)``; each damaged newer one is named on stdout."""
    for step in reversed([s for s in checkpoint_steps(run_dir) if start <= s <= end]):
        problem = checkpoint_problem(run_dir, step, state)
        if problem is None:
            return [step]
        print(f"gentax: not resuming from {checkpoint_dir(run_dir, step)}: {problem}; trying the checkpoint before it")
    return []


def resume_step(run_dir: str | Path, start: int, end: int, available: Iterable[int] | None = None) -> int:
    """The step to continue from for ``--steps start:end``: the latest checkpoint in [start, end], else
    ``start`` (0: the init model). With start > 0 the run must hold a checkpoint at ``start`` or later:
    extending a run never retrains a step nor starts from the wrong weights."""
    steps = sorted(set(checkpoint_steps(run_dir) if available is None else available))
    usable = [s for s in steps if start <= s <= end]
    if usable:
        return usable[-1]
    if start > 0:
        have = ", ".join(map(str, steps)) or "none"
        raise ConfigError(f"--steps {start}:{end}: run {run_dir} has no checkpoint at step {start} or later "
                          f"(checkpoints: {have}); train {0 if not steps else steps[-1]}:{start} first")
    return 0


@contextlib.contextmanager
def locked(run_dir: str | Path) -> Iterator[str | None]:
    """Hold the run folder for one trainer; yields the previous holder's description when a killed
    trainer's lock was taken over (after ending the processes it left on this host), else None.
    What the body starts is this trainer's and ends with it (``gentax.train.processes``). A trainer
    that holds the lock already holds it on."""
    if gio.holds(Path(run_dir) / LOCK_FILE):  # this trainer took it before its imports (gentax train rl --job)
        yield None
        return
    token = processes.new_token()
    with gio.exclusive(Path(run_dir) / LOCK_FILE, f"run folder {run_dir}", record={"owner": token}) as previous:
        if previous and previous.get("owner") and previous.get("host") == socket.gethostname():
            for ended in processes.end_marked(processes.OWNER_ENV, previous["owner"]):
                print(f"gentax: ended {ended}, left by the killed trainer of {run_dir}")
        with processes.owning(token):
            yield gio.describe_holder(previous) if previous else None


def remove_temporaries(run_dir: str | Path) -> list[Path]:
    """Delete the temporaries of killed atomic writes in a run folder and in every subfolder the
    trainer writes atomically (``ATOMIC_FOLDERS``); call it holding the lock."""
    run_dir = Path(run_dir)
    return [tmp for folder in ATOMIC_FOLDERS for tmp in gio.remove_temporaries(run_dir / folder)]


def init_fingerprint(init: str | Path) -> str:
    """What identifies the initial policy's weights, cheaply: the sha256 of its folder's manifest where it has
    one (the study's own models and checkpoints), else of its files' names, sizes and modification times."""
    folder = Path(init)
    manifest = folder / gio.MANIFEST_FILE
    if manifest.is_file():
        return gio.file_digest(manifest)["sha256"]
    return provenance.config_hash(gio.files_stat(folder))


def check_identity(run_dir: str | Path, identity: dict[str, Any], config: dict[str, Any], start: int = 0) -> None:
    """Write run.json on the first call; later calls must name the same run (else ConfigError).

    A run folder whose steps were trained with another recipe (RL config, run spec but its total steps, or
    initial policy: ``init_fingerprint``) is stale, as Snakemake sees it when it reruns the job: a first
    segment (``start`` 0) deletes it and trains from step 0, saying what changed; a later segment cannot
    continue it (ConfigError). Keys an older run.json lacks are not compared."""
    run_dir = Path(run_dir)
    path = run_dir / RUN_FILE
    recipe = json.loads(json.dumps({"config": config, "init_fingerprint": init_fingerprint(identity["init"]),
                                    "run_spec": {k: v for k, v in identity["run_spec"].items() if k != "steps"}}))
    if path.is_file():
        old = gio.read_result_json(path, fix="it names the run its folder holds: delete it and rerun the run's "
                                              "training job (which writes it again; the checkpoints stay)")
        diff = [k for k in IDENTITY_KEYS if str(old.get(k)) != str(identity.get(k))]
        if diff:
            shown = ", ".join(f"{k}: {old.get(k)!r} != {identity.get(k)!r}" for k in diff)
            raise ConfigError(f"{run_dir} holds a different run ({shown}); use another --out")
        recorded = {**old, "run_spec": {k: v for k, v in (old.get("run_spec") or {}).items() if k != "steps"}}
        changed = sorted(_changes(recorded, recipe))
        if not changed:
            return
        shown = ", ".join(changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else "")
        if start > 0:
            raise ConfigError(f"{run_dir} was trained with another recipe ({shown} changed): segment {start}: cannot "
                              "continue it; train the run from step 0 again")
        print(f"gentax: {run_dir} holds steps trained with another recipe ({shown} changed): stale, so they are "
              "deleted and the run trains from step 0")
        for entry in run_dir.iterdir():
            if entry.name not in (LOCK_FILE, RUN_SPEC_FILE):  # the lock and this segment's own run spec stay
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    write_json(path, {**identity, **recipe, "run_spec": identity["run_spec"]})


def _changes(old: Any, new: Any, where: str = "") -> Iterator[str]:
    """The dotted keys where ``new`` differs from ``old``, over the keys ``old`` records."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old.keys() & new.keys():
            yield from _changes(old[key], new[key], f"{where}.{key}" if where else str(key))
    elif old != new:
        yield where


def rollout_metrics(steps, episodes) -> dict[str, float]:
    """Per-step training metrics of one step's rollouts (both engines): ``steps`` needs columns valid,
    reason; ``episodes`` won, return, length. Invalid rates are per step sample, overall and by reason
    (every parser reason code, 0 when absent)."""
    n_steps = max(len(steps), 1)
    out = {
        "id_success": float(episodes["won"].mean()) if len(episodes) else float("nan"),
        "return_mean": float(episodes["return"].mean()) if len(episodes) else float("nan"),
        "episode_length": float(episodes["length"].mean()) if len(episodes) else float("nan"),
        "trajectories": float(len(episodes)),
        "samples": float(len(steps)),
        "invalid_rate": float((~steps["valid"].astype(bool)).sum() / n_steps),
    }
    reasons = steps.loc[~steps["valid"].astype(bool), "reason"].fillna("invalid").value_counts()
    for reason in sorted(set(REASONS) | set(reasons.index)):
        out[f"invalid/{reason}"] = float(reasons.get(reason, 0) / n_steps)
    return out


def domain_success(episodes, weights: dict[str, int]) -> dict[str, float]:
    """A mixture run's per-domain training success of one step (both engines): ``id_success/<d>``
    for every domain of ``weights`` (NaN for one no task of this step was drawn from); {} for a
    run on one domain. ``episodes`` needs columns domain, won."""
    if len(weights) < 2:
        return {}
    out = {}
    for domain in weights:
        won = episodes.loc[episodes["domain"] == domain, "won"] if len(episodes) else []
        out[f"id_success/{domain}"] = float(won.astype(float).mean()) if len(won) else float("nan")
    return out


def metrics_fix(run_dir: str | Path) -> str:
    """What rebuilds a damaged ``metrics.csv``: only training writes its rows."""
    return (f"it holds the metrics of every trained step, which only training writes: delete the run folder "
            f"{run_dir} and rerun its training jobs")


class MetricsLog:
    """``metrics.csv``: one row per step, rewritten atomically at every change; rows past a resume
    point are dropped. A trainer writes a step's row BEFORE saving its checkpoint: a kill between the
    two leaves a row the resume drops and retrains, where the other order would lose a row for good."""

    def __init__(self, run_dir: str | Path, resume_from: int):
        import pandas as pd

        self.path = Path(run_dir) / METRICS_FILE
        rows = gio.read_result_csv(self.path, fix=metrics_fix(run_dir)) if self.path.is_file() and \
            self.path.stat().st_size else pd.DataFrame()
        if len(rows) and "step" in rows:
            rows = rows[rows["step"] <= resume_from]
        self.rows: list[dict[str, Any]] = rows.to_dict("records")

    def append(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self._write()

    def upsert(self, row: dict[str, Any]) -> None:
        """Merge ``row`` into the row of the same step (appended when there is none)."""
        for old in self.rows:
            if old.get("step") == row["step"]:
                old.update(row)
                break
        else:
            self.rows.append(row)
        self._write()

    def _write(self) -> None:
        import pandas as pd

        frame = pd.DataFrame(self.rows)
        first = [c for c in ("step", "seconds") if c in frame]
        frame = frame[first + [c for c in frame.columns if c not in first]]
        with atomic_path(self.path) as tmp:
            frame.to_csv(tmp, index=False)


# ---- the filler arm's reference: the matching thinking run ---------------------------------------
def write_think_samples(run_dir: str | Path, step: int, texts: list[str], seed: int) -> None:
    """Keep up to ``THINK_SAMPLES_KEPT`` of a step's think blocks (a seeded draw), atomically."""
    rng = np.random.default_rng([int(seed), int(step), 0x7468])  # "th"
    keep = sorted(rng.choice(len(texts), min(len(texts), THINK_SAMPLES_KEPT), replace=False)) if texts else []
    write_json(Path(run_dir) / THINK_SAMPLES / f"step_{step}.json", {"step": int(step), "texts": [texts[i] for i in keep]})


def think_reference(run_dir: str | Path, step: int) -> tuple[int, tuple[str, ...]]:
    """(think tokens, think texts) of step ``step`` of the thinking run in ``run_dir``: its
    metrics.csv ``think_tokens_mean`` rounded (0 when no sample of that step had a complete think
    block) and the think blocks kept in ``think_samples``; ConfigError naming what is missing."""
    path = Path(run_dir) / METRICS_FILE
    if not path.is_file():
        raise ConfigError(f"filler arm: the thinking run {run_dir} has no {METRICS_FILE} (train it first)")
    rows = gio.read_result_csv(path, fix=metrics_fix(run_dir))
    if THINK_TOKENS_MEAN not in rows:
        raise ConfigError(f"filler arm: {path} has no {THINK_TOKENS_MEAN} column (a thinking run of the local engine "
                          "logs it; the verl engine does not)")
    row = rows[rows["step"] == int(step)]
    if row.empty:
        raise ConfigError(f"filler arm: {path} has no row for step {step} (the thinking run must be trained that far)")
    mean = float(row[THINK_TOKENS_MEAN].iloc[-1])
    samples = Path(run_dir) / THINK_SAMPLES / f"step_{step}.json"
    texts = tuple(gio.read_result_json(samples, keys=("texts",), fix=metrics_fix(run_dir))["texts"]) \
        if samples.is_file() else ()
    return (0 if np.isnan(mean) else int(round(mean))), texts

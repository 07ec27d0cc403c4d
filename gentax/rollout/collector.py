"""The collector: batched multi-turn rollouts in lockstep, for RL, SFT data, evaluation and property logs.

    rollouts = collect(generator, task_seeds, CollectConfig(domain=..., split=...), run_id="...")
    rollouts.steps / rollouts.episodes   # pyarrow tables (gentax.rollout.schema)
    rollouts.tokens[i]                   # prompt ids, response ids, logprobs of step row i
    rollouts.write(prefix)               # <prefix>.steps.parquet, <prefix>.episodes.parquet

Each task seed is played ``group_size`` times (``traj_id = group_id * group_size + k``). Each turn:
every active trajectory's prompt from what the agent SAW (its augmented observation), ONE
``generate`` call for all of them, the responses parsed against the admissible actions (an unusable
one is an invalid step, never an exception), the envs stepped (augmentation never reaches them), a
step row recorded (docs/rollout.md "Collector"). Filler mode (``cfg.filler``) forces the prefix
``<think>FILLER</think>`` through the generator's ``prefixes``; ``think_tokens`` is the think
block's token count the action was conditioned on.

Seeds: all from ``cfg.seed``: trajectory ``j`` samples step ``t`` with ``derive_seed(cfg.seed,
"sample", cfg.sampling.seed, j, t)`` and augments with ``derive_seed(cfg.seed, "augment", j)``; the
pool's envs are built with ``seed=cfg.seed``. Pass ``pool=`` to reuse a pool, or use ``EnvPools``.
``rollouts.stats`` splits the time into ``generate_s``, ``env_s``, ``reset_s`` and ``other_s``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from typing import Any

from gentax import progress as gprogress
from gentax.agent.filler import encode, filler_ids, think_prefix_ids
from gentax.agent.parse import Parsed, parse_response
from gentax.agent.prompts import build_messages, mode_of
from gentax.domains import SPLITS, make
from gentax.domains.augment import TrajectoryAugmenter
from gentax.domains.pool import EnvPool
from gentax.domains.spec import spec
from gentax.errors import GentaxError, short_reason
from gentax.rollout.generators import Generation, SamplingParams, derive_seed
from gentax.rollout.schema import EPISODE_SCHEMA, STEP_SCHEMA, Rollouts, StepTokens, table_from_rows

log = logging.getLogger(__name__)

#: longest raw action text repeated in the history of an invalid step
HISTORY_ACTION_CHARS = 200


@dataclasses.dataclass
class CollectConfig:
    domain: str
    split: str
    think: bool | str = True  # True/"on", False/"off", "filler" (gentax.agent.prompts.MODES)
    history_length: int = 2
    group_size: int = 1
    sampling: SamplingParams = dataclasses.field(default_factory=SamplingParams)
    aug_eps: int = 0
    aug_p: float = 0.0
    aug_kind: str = "distractor"
    max_steps: int | None = None
    env_options: dict[str, Any] = dataclasses.field(default_factory=dict)
    num_workers: int = 0
    seed: int = 0
    batch_size: int | None = None  # trajectories in flight at once (None: all of them)
    filler: Any = None  # gentax.agent.filler.FillerSpec: the forced think block of filler mode

    def validate(self) -> None:
        spec(self.domain)  # an unknown domain is one GentaxError
        if (mode_of(self.think) == "filler") != (self.filler is not None):
            raise GentaxError("think mode 'filler' needs a filler spec, and a filler spec needs think mode 'filler' "
                              f"(got think={self.think!r}, filler={self.filler!r})")
        if self.split not in SPLITS:
            raise GentaxError(f"unknown split {self.split!r}; valid: {', '.join(SPLITS)}")
        if self.group_size < 1:
            raise GentaxError(f"group_size must be >= 1, got {self.group_size}")
        if self.history_length < 0:
            raise GentaxError(f"history_length must be >= 0, got {self.history_length}")
        if self.batch_size is not None and self.batch_size < 1:
            raise GentaxError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.max_steps is not None and self.max_steps < 1:
            raise GentaxError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.aug_eps < 0 or not 0.0 <= self.aug_p <= 1.0:
            raise GentaxError(f"augmentation needs aug_eps >= 0 and 0 <= aug_p <= 1, got {self.aug_eps}, {self.aug_p}")


@dataclasses.dataclass
class _Trajectory:
    traj_id: int
    group_id: int
    task_seed: int
    slot: int
    augmenter: Any
    obs: Any = None
    history: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    steps: int = 0
    done: bool = False
    ret: float = 0.0
    invalid: int = 0
    response_tokens: int = 0
    truncated: bool = False
    won: bool = False
    error: str | None = None


class _Clock:
    def __init__(self):
        self.seconds = {"generate_s": 0.0, "env_s": 0.0, "reset_s": 0.0, "other_s": 0.0}
        self._last = time.perf_counter()

    def lap(self, bucket: str) -> None:
        now = time.perf_counter()
        self.seconds[bucket] += now - self._last
        self._last = now


def collect(generator, task_seeds: list[int], cfg: CollectConfig, *, run_id: str = "", pool=None,
            progress: bool = True) -> Rollouts:
    """Run ``group_size`` trajectories per task seed (see the module docstring)."""
    cfg.validate()
    task_seeds = [int(s) for s in task_seeds]
    if not task_seeds:
        raise GentaxError("collect needs at least one task seed")
    if pool is not None and (pool.domain, pool.split) != (cfg.domain, cfg.split):
        raise GentaxError(f"pool is for {pool.domain}/{pool.split}, config for {cfg.domain}/{cfg.split}")
    started = time.perf_counter()
    tasks = _make_tasks(cfg, task_seeds)
    plan = [(g, k) for g in range(len(task_seeds)) for k in range(cfg.group_size)]
    batch_size = cfg.batch_size or len(plan)
    own_pool = pool is None
    if own_pool:
        pool = _new_pool(cfg)
    step_rows: list[dict] = []
    tokens: list[StepTokens] = []
    episode_rows: list[dict] = []
    clock = _Clock()
    gprogress.episodes_planned(len(plan))  # the job's progress line (gentax.progress), if a job is active
    stats = {"response_tokens": 0, "prompt_tokens": 0, "turns": 0}
    try:
        batches = [plan[i : i + batch_size] for i in range(0, len(plan), batch_size)]
        for number, batch in enumerate(batches, 1):
            label = f"{cfg.domain} batch {number}/{len(batches)}"
            trajectories = _run_batch(generator, pool, tasks, batch, cfg, run_id, step_rows, tokens, clock, stats, label, progress)
            episode_rows.extend(_episode_row(t, cfg, run_id) for t in trajectories)
    finally:
        if own_pool:
            pool.close()
    order = sorted(range(len(step_rows)), key=lambda i: (step_rows[i]["traj_id"], step_rows[i]["step"]))
    steps = table_from_rows([step_rows[i] for i in order], STEP_SCHEMA)
    episodes = table_from_rows(sorted(episode_rows, key=lambda r: r["traj_id"]), EPISODE_SCHEMA)
    wall = time.perf_counter() - started
    stats.update(clock.seconds, wall_s=wall, episodes=len(episode_rows), steps=len(step_rows))
    stats["tokens_per_s"] = stats["response_tokens"] / stats["generate_s"] if stats["generate_s"] > 0 else float("nan")
    return Rollouts(steps, episodes, [tokens[i] for i in order], stats)


def _new_pool(cfg: CollectConfig):
    return EnvPool(cfg.domain, cfg.split, num_workers=cfg.num_workers, seed=cfg.seed, max_steps=cfg.max_steps, **cfg.env_options)


class EnvPools:
    """Env pools kept across ``collect`` calls, one per domain, split and env settings, so a domain's
    envs (SciWorld's JVMs, ALFWorld's engines) start once per process. A call leases a pool for its
    duration (concurrent calls each get their own). Every episode resets its env to its own task, so
    a reused pool plays exactly the episodes a fresh one would. ``close()`` ends them all."""

    def __init__(self):
        self._idle: dict[tuple, list[Any]] = {}
        self._all: list[Any] = []
        self._lock = threading.Lock()

    def collect(self, generator, task_seeds: list[int], cfg: CollectConfig, **kwargs) -> Rollouts:
        """``collect`` on a pool for ``cfg``'s env settings: an idle one, or a new one."""
        key = (cfg.domain, cfg.split, cfg.num_workers, cfg.max_steps, json.dumps(cfg.env_options, sort_keys=True))
        with self._lock:
            idle = self._idle.setdefault(key, [])
            pool = idle.pop() if idle else None
        if pool is None:
            pool = _new_pool(cfg)
            with self._lock:
                self._all.append(pool)
        try:
            return collect(generator, task_seeds, cfg, pool=pool, **kwargs)
        finally:
            with self._lock:
                self._idle[key].append(pool)

    def pools(self) -> int:
        """How many pools this cache has built."""
        return len(self._all)

    def close(self) -> None:
        with self._lock:
            pools, self._all, self._idle = self._all, [], {}
        for pool in pools:
            pool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _make_tasks(cfg: CollectConfig, task_seeds: list[int]) -> list[Any]:
    """The Task of each seed (index = group_id), from one planner env of the same settings."""
    with make(cfg.domain, split=cfg.split, seed=cfg.seed, max_steps=cfg.max_steps, **cfg.env_options) as planner:
        by_seed = {seed: planner.task(seed) for seed in dict.fromkeys(task_seeds)}
    return [by_seed[seed] for seed in task_seeds]


def _run_batch(generator, pool, tasks, batch, cfg, run_id, step_rows, tokens, clock, stats, label, progress):
    from tqdm.auto import tqdm

    trajectories = []
    for slot, (group_id, k) in enumerate(batch):
        traj_id = group_id * cfg.group_size + k
        augmenter = TrajectoryAugmenter(cfg.domain, cfg.aug_eps, cfg.aug_p, cfg.aug_kind, seed=derive_seed(cfg.seed, "augment", traj_id))
        trajectories.append(_Trajectory(traj_id, group_id, tasks[group_id].seed, slot, augmenter))
    clock.lap("other_s")
    observations = pool.reset([tasks[group_id] for group_id, _ in batch])
    clock.lap("reset_s")
    for trajectory, obs in zip(trajectories, observations):
        trajectory.obs = obs
    wants_expert = bool(getattr(generator, "needs_expert_action", False))
    forced = _ForcedThink(generator, cfg)
    bar = tqdm(total=len(trajectories), desc=label, unit="traj", disable=not progress, leave=False)
    batch_tokens, batch_gen_s, turn = 0, 0.0, 0
    try:
        while True:
            active = [t for t in trajectories if not t.done]
            if not active:
                break
            turn += 1
            # 1. what every active trajectory sees, and its prompt
            shown, prompts = [], []
            for t in active:
                view = t.augmenter(t.obs.text, t.steps, goal=t.obs.goal)
                shown.append(view)
                seen = t.obs._replace(text=view.text)
                prompts.append(build_messages(cfg.domain, seen, t.history, t.steps, think=cfg.think, history_length=cfg.history_length))
            params = [dataclasses.replace(cfg.sampling, seed=derive_seed(cfg.seed, "sample", cfg.sampling.seed, t.traj_id,
                                                                         t.steps)) for t in active]
            clock.lap("other_s")
            hints = None
            if wants_expert:
                experts = pool.expert_actions([t.slot for t in active])
                hints = [{"expert_action": experts[t.slot], "think": forced.mode == "on"} for t in active]
                clock.lap("env_s")
            fillers = forced.fillers(active)
            # 2. one generate call for the whole batch
            generations = (generator.generate(prompts, params, hints) if fillers is None else
                           generator.generate(prompts, params, hints, prefixes=[f.prefix for f in fillers]))
            if len(generations) != len(active):
                raise RuntimeError(f"generator returned {len(generations)} results for {len(active)} prompts")
            elapsed = clock.seconds["generate_s"]
            clock.lap("generate_s")
            batch_gen_s += clock.seconds["generate_s"] - elapsed
            # 3. parse
            parsed = [_parse(g.text, cfg, t.obs.admissible) for t, g in zip(active, generations)]
            valid = {t.slot: p.action for t, p in zip(active, parsed) if p.reason is None}
            invalid = {t.slot: p.reason for t, p in zip(active, parsed) if p.reason is not None}
            clock.lap("other_s")
            # 4. step the envs
            results = {}
            if valid:
                results.update(pool.step(valid))
            if invalid:
                results.update(pool.step_invalid(invalid))
            clock.lap("env_s")
            # 5. record
            for k, (t, view, messages, generation, p) in enumerate(zip(active, shown, prompts, generations, parsed)):
                obs, reward, done, info = results[t.slot]
                row = _step_row(t, cfg, run_id, view, messages, generation, p, reward, done, info)
                row.update(forced.think_columns(p, None if fillers is None else fillers[k]))
                step_rows.append(row)
                tokens.append(StepTokens(generation.prompt_ids, generation.response_ids, generation.logprobs))
                batch_tokens += len(generation.response_ids)
                stats["response_tokens"] += len(generation.response_ids)
                gprogress.tokens(len(generation.response_ids))
                stats["prompt_tokens"] += len(generation.prompt_ids)
                t.history.append((view.text, p.action if p.action is not None else _raw_action(p)))
                t.obs = obs
                t.steps += 1
                t.ret += reward
                t.invalid += not info.get("valid", True)
                t.response_tokens += len(generation.response_ids)
                if done:
                    t.done, t.won, t.truncated = True, bool(info.get("won")), bool(info.get("truncated"))
                    t.error = _error_reason(info)
                    bar.update(1)
                    gprogress.episode_finished()
            stats["turns"] += 1
            bar.set_postfix(turn=turn, tok_s=f"{batch_tokens / batch_gen_s:.1f}" if batch_gen_s else "-")
            clock.lap("other_s")
    finally:
        bar.close()
    log.info(
        "%s: %d trajectories, %d turns, %d response tokens in %.1f s generation (%.1f tok/s); totals so far: env %.1f s (+ %.1f s resets), other %.1f s",
        label, len(trajectories), turn, batch_tokens, batch_gen_s, batch_tokens / batch_gen_s if batch_gen_s else float("nan"),
        clock.seconds["env_s"], clock.seconds["reset_s"], clock.seconds["other_s"],
    )
    return trajectories


@dataclasses.dataclass
class _Filler:
    prefix: list[int]  # forced assistant prefix ids: <think> + filler + </think>
    text: str  # the filler as it reads in the context
    tokens: int


class _ForcedThink:
    """The think mode of a collect call: filler prefixes (filler mode) and the think columns."""

    def __init__(self, generator, cfg: CollectConfig):
        self.mode, self.cfg = mode_of(cfg.think), cfg
        self.tokenizer = getattr(generator, "tokenizer", None)
        if self.mode == "filler" and self.tokenizer is None:
            raise GentaxError("think mode 'filler' needs a generator with a tokenizer (filler counts are in tokens)")

    def fillers(self, active) -> list[_Filler] | None:
        if self.mode != "filler":
            return None
        out = []
        for t in active:
            ids = filler_ids(self.cfg.filler, self.tokenizer, derive_seed(self.cfg.seed, "filler", t.traj_id, t.steps))
            out.append(_Filler(think_prefix_ids(self.tokenizer, ids), self.tokenizer.decode(ids), len(ids)))
        return out

    def think_columns(self, parsed, filler: _Filler | None) -> dict:
        if filler is not None:
            return {"think_tokens": filler.tokens, "filler": filler.text}
        counted = self.mode == "on" and parsed.think is not None and self.tokenizer is not None
        return {"think_tokens": len(encode(self.tokenizer, parsed.think)) if counted else None, "filler": None}


def _parse(text: str, cfg: CollectConfig, admissible):
    """The parser's verdict; a parser bug on some odd text must not end the rollout, but a
    configuration error (an unknown domain: GentaxError) must, never a silent 0 % success."""
    try:
        return parse_response(text, domain=cfg.domain, admissible=admissible, think=cfg.think)
    except GentaxError:
        raise
    except Exception as exc:  # noqa: BLE001 - logged, and the step counts as invalid
        log.warning("parse_response failed on %r: %s: %s", text[:200], type(exc).__name__, exc)
        return Parsed(action=None, reason="parse_error", think=None)


def _raw_action(parsed) -> str:
    """What the agent tried, for the history of an invalid step ('' when it gave no action)."""
    return " ".join((parsed.raw_action or "").split())[:HISTORY_ACTION_CHARS]


def _last_user_text(messages: list[dict[str, str]]) -> str:
    return next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")


def _identity(t: _Trajectory, cfg, run_id) -> dict:
    return {
        "run": run_id,
        "domain": cfg.domain,
        "split": cfg.split,
        "task_seed": t.task_seed,
        "group_id": t.group_id,
        "traj_id": t.traj_id,
    }


def _step_row(t: _Trajectory, cfg, run_id, view, messages, generation: Generation, parsed, reward, done, info) -> dict:
    valid = bool(info.get("valid", True))
    return {
        **_identity(t, cfg, run_id),
        "step": t.steps,
        "prompt": _last_user_text(messages),
        "response": generation.text,
        "action": parsed.action,
        "valid": valid,
        "reason": None if valid else (parsed.reason or info.get("reason") or "invalid"),
        "reward": float(reward),
        "done": bool(done),
        "won": bool(info.get("won", False)),
        "obs_chars": len(view.text),
        "augmented": bool(view.inserted),
        "admissible_count": len(t.obs.admissible),
        "error": _error_reason(info),
        "finish_reason": generation.finish_reason,
        "prompt_tokens": len(generation.prompt_ids),
        "response_tokens": len(generation.response_ids),
    }


def _episode_row(t: _Trajectory, cfg, run_id) -> dict:
    return {
        **_identity(t, cfg, run_id),
        "length": t.steps,
        "return": t.ret,
        "won": t.won,
        "invalid_steps": t.invalid,
        "augmented": bool(t.augmenter.active),
        "truncated": t.truncated,
        "response_tokens": t.response_tokens,
        "error": t.error,
    }


def _error_reason(info: dict) -> str | None:
    error = info.get("error")
    return short_reason(error) if error else None

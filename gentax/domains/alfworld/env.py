"""ALFWorld behind the gentax protocol: the real TextWorld engine on official or generated games.

docs/alfworld.md describes the games and splits, the observations, the step rules and the expert.
Option ``source``: ``"official"`` (the release under ``$ALFWORLD_DATA/json_2.1.1`` or ``data_dir``),
``"generated"`` (``scenegen``'s games, written into ``cache_dir`` on a task's first reset) or
``"auto"`` (official when present). The expert follows a generated game's stored plan while the
agent does, and replans with fast-downward once the agent leaves it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import os
import random
from pathlib import Path
from typing import Any

from gentax.domains.alfworld import engine as alf_engine
from gentax.domains.alfworld import scenegen
from gentax.domains.base import DomainEnv, InvalidAction, Observation, Task
from gentax.errors import GentaxError
from gentax.io import default_cache_dir  # $GENTAX_CACHE or ~/.cache/gentax

SOURCES = ("auto", "official", "generated")
EVAL_SPLITS = ("eval_out_of_distribution", "eval_in_distribution")
_OFFICIAL_DIRS = {"train": "train", "eval_in_distribution": "valid_seen", "eval_out_of_distribution": "valid_unseen"}
_TASK_PREFIX = "Your task is to: "
_DROPPED_COMMANDS = frozenset({"help"})


def official_root(data_dir: str | os.PathLike | None) -> Path | None:
    """The ``json_2.1.1`` folder of an official ALFWorld download, when there is one."""
    base = data_dir if data_dir is not None else os.environ.get("ALFWORLD_DATA")
    if not base:
        return None
    root = Path(base).expanduser() / "json_2.1.1"
    return root if root.is_dir() else None


@functools.lru_cache(maxsize=16)
def official_games(split_dir: str, task_types: tuple[str, ...]) -> tuple[str, ...]:
    """Solvable games of an official split folder, in a fixed shuffled order (alfworld's filter)."""
    tw_env = alf_engine.import_alfworld("agents.environment.alfred_tw_env")
    type_ids = [i for i, name in tw_env.TASK_TYPES.items() if name in task_types]
    config = {
        "dataset": {"data_path": split_dir, "num_train_games": -1},
        "env": {"task_types": type_ids, "goal_desc_human_anns_prob": 0},
    }
    # AlfredTWEnv prints progress and counts; keep the caller's terminal clean
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        games = sorted(tw_env.AlfredTWEnv(config, train_eval="train").game_files)
    random.Random(f"gentax-alfworld-official|{Path(split_dir).name}").shuffle(games)
    return tuple(games)


class AlfworldEnv(DomainEnv):
    name = "alfworld"
    default_max_steps = 50
    default_options = {
        "source": "auto",
        "eval_split": "eval_out_of_distribution",
        "data_dir": None,
        "cache_dir": None,
        "task_types": None,
        "max_receptacles": None,
        "max_objects": None,
    }

    @classmethod
    def check_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        opts = super().check_options(options)
        if opts["source"] not in SOURCES:
            raise GentaxError(f"alfworld option source must be one of {', '.join(SOURCES)}, got {opts['source']!r}")
        if opts["eval_split"] not in EVAL_SPLITS:
            raise GentaxError(
                f"alfworld option eval_split must be one of {', '.join(EVAL_SPLITS)}, got {opts['eval_split']!r}"
            )
        scenegen.SceneOptions.parse(opts["task_types"], opts["max_receptacles"], opts["max_objects"])
        return opts

    def __init__(self, split: str = "train", seed: int = 0, max_steps: int | None = None, **options):
        super().__init__(split=split, seed=seed, max_steps=max_steps, **options)
        opts = self.options
        self.scene_options = scenegen.SceneOptions.parse(
            opts["task_types"], opts["max_receptacles"], opts["max_objects"]
        )
        root = official_root(opts["data_dir"])
        if opts["source"] == "official" and root is None:
            where = opts["data_dir"] or os.environ.get("ALFWORLD_DATA") or "(ALFWORLD_DATA is not set)"
            raise GentaxError(f"alfworld source 'official' needs json_2.1.1 under {where}")
        self.source = "official" if opts["source"] == "official" or (opts["source"] == "auto" and root) else "generated"
        self.official_root = root if self.source == "official" else None
        self.cache_root = Path(opts["cache_dir"]).expanduser() if opts["cache_dir"] else default_cache_dir()
        self._engine = None
        self._admissible: tuple[str, ...] = ()
        self._goal = ""
        self._plan: list[str] | None = None
        self._plan_pos = 0

    # ---- tasks ---------------------------------------------------------------------------
    def official_split_dir(self) -> Path:
        split = "train" if self.split == "train" else self.options["eval_split"]
        return self.official_root / _OFFICIAL_DIRS[split]

    def _make_task(self, seed: int) -> Task:
        if self.source == "official":
            split_dir = self.official_split_dir()
            games = official_games(str(split_dir), self.scene_options.task_types)
            if not games:
                raise GentaxError(f"alfworld: no solvable games of the chosen task types under {split_dir}")
            game_file = games[seed % len(games)]
            spec = {"source": "official", "game_file": game_file, "split_dir": str(split_dir)}
        else:
            opts = self.scene_options
            spec = {
                "source": "generated",
                "split": self.split,
                "seed": seed,
                "scene": dataclasses.asdict(opts),
                "cache_root": str(self.cache_root),
                "task_type": scenegen.task_type_for(seed, opts),
                "game_file": str(scenegen.game_dir(self.cache_root, self.split, seed, opts) / "game.tw-pddl"),
            }
        return Task(self.name, self.split, seed, spec)

    def game_file(self, task: Task) -> Path:
        """The task's ``game.tw-pddl``, generating it first when it is a generated game."""
        spec = task.spec
        if spec["source"] == "official":
            return Path(spec["game_file"])
        opts = scenegen.SceneOptions.parse(**spec["scene"])
        with alf_engine.engine_call():
            return scenegen.generate_game(self.engine, spec["split"], spec["seed"], opts, spec["cache_root"])

    @property
    def engine(self):
        if self._engine is None:
            self._engine = alf_engine.make_engine()
        return self._engine

    # ---- protocol hooks ------------------------------------------------------------------
    def _reset(self, task: Task) -> Observation:
        game_file = self.game_file(task)
        with alf_engine.engine_call():
            state = alf_engine.load_game(self.engine, game_file)
        text = state.feedback
        start = text.find(_TASK_PREFIX)
        self._goal = text[start + len(_TASK_PREFIX) :].strip() if start >= 0 else ""
        walkthrough = self.engine.unwrapped.walkthrough  # stored plan of generated games
        self._plan = list(walkthrough) if walkthrough else None
        self._plan_pos = 0
        return self._observe(state)

    def _observe(self, state) -> Observation:
        self._admissible = tuple(c for c in state["admissible_commands"] if c not in _DROPPED_COMMANDS)
        return Observation(text=state.feedback, goal=self._goal, admissible=self._admissible)

    def _step(self, action: str) -> tuple[Observation, bool]:
        if action not in self._admissible:
            raise InvalidAction("not_admissible", action[:80])
        state, _, _ = self.engine.step(action)
        if self._plan is not None and self._plan_pos < len(self._plan) and self._plan[self._plan_pos] == action:
            self._plan_pos += 1
        else:
            self._plan = None  # the agent left the expert's plan: replan when asked
        return self._observe(state), bool(state["won"])

    def expert_action(self) -> str:
        if self._plan is None or self._plan_pos >= len(self._plan):
            self._plan = alf_engine.replan(self.engine)
            self._plan_pos = 0
        if not self._plan:
            return "look"  # the goal holds already or is out of reach: a harmless valid step
        return self._plan[self._plan_pos]

    def close(self) -> None:
        if self._engine is not None:
            alf_engine.close_engine(self._engine)
            self._engine = None

"""The real ALFWorld engine (TextWorld's PDDL environment), assembled by hand, traps defused.

What ``alfworld``'s ``AlfredTWEnv`` would build (``PddlEnv`` -> ``AlfredDemangler`` ->
``AlfredInfos``), with the fast-downward planner called only when asked (``replan``) rather than
``AlfredExpert``'s replanning at every step. The traps handled here, in one place (docs/alfworld.md
"The engine" says why each matters): ``import alfworld`` writes ``$ALFWORLD_DATA``
(``import_alfworld``); the translator overwrites ``sys.argv`` (``engine_call``); the grammar parse
and PDDL translation redone at every load are cached per process (``GameCache``); each engine's
private copy of ``libdownward.so`` is handed on, never unloaded (``close_engine``), and loaded
from memory rather than a temporary file that would hold its disk space (``load_library``).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import importlib
import importlib.util
import os
import shutil
import sys
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Iterator

from gentax.errors import GentaxError


def alfworld_root() -> Path:
    """The installed ``alfworld`` package folder, found without importing it."""
    spec = importlib.util.find_spec("alfworld")
    if spec is None or not spec.submodule_search_locations:
        raise GentaxError("the alfworld domain needs the alfworld package (pip install alfworld==0.4.2)")
    return Path(list(spec.submodule_search_locations)[0])


def import_alfworld(module: str):
    """Import ``alfworld.<module>`` without ``alfworld.info``'s side effects (see above)."""
    name = f"alfworld.{module}"
    if name in sys.modules:
        return sys.modules[name]
    previous = os.environ.get("ALFWORLD_DATA")
    scratch = tempfile.mkdtemp(prefix="gentax-alfworld-import-")
    os.environ["ALFWORLD_DATA"] = scratch
    try:
        return importlib.import_module(name)
    finally:
        if previous is None:
            os.environ.pop("ALFWORLD_DATA", None)
        else:
            os.environ["ALFWORLD_DATA"] = previous
        shutil.rmtree(scratch, ignore_errors=True)


@functools.lru_cache(maxsize=1)
def domain_files() -> tuple[str, str]:
    """The PDDL domain and TextWorld grammar (``alfred.twl2``) that ship with alfworld."""
    data = alfworld_root() / "data"
    return (data / "alfred.pddl").read_text(), (data / "alfred.twl2").read_text()


class _LRU:
    """A bounded key -> value map that forgets the least recently used entry; counts its work."""

    def __init__(self, size: int):
        self.size = size
        self.entries: OrderedDict[Any, Any] = OrderedDict()
        self.made = 0  # values computed (misses)
        self.reused = 0  # values served from the map (hits)

    def get(self, key, make: Callable[[], Any]):
        if key in self.entries:
            self.entries.move_to_end(key)
            self.reused += 1
            return self.entries[key]
        value = make()
        self.made += 1
        self.entries[key] = value
        if len(self.entries) > self.size:
            self.entries.popitem(last=False)
        return value


class GameCache:
    """What TextWorld parses from a game's text, kept for the next ``load`` of the same game.

    Entries are keyed by the very text they are computed from, so an edited game is a new key.
    ``grammars``: a game grammar's parse, handed out as a deep copy (far cheaper than parsing), so
    no engine changes another's. ``translations``: fast-downward's (PDDL task, SAS text) of
    (domain, problem, optimize), shared, since TextWorld only reads them. What changes during an
    episode is still built per ``load``/``reset``, so an episode plays exactly as without the
    cache. ``max_games`` (64: an evaluation set or an RL batch; 1-2 MB a game) bounds both.
    """

    def __init__(self, max_games: int = 64):
        self.grammars = _LRU(max_games)
        self.translations = _LRU(2 * max_games)

    def grammar(self, text: str, parse: Callable[[str], Any]):
        return copy.deepcopy(self.grammars.get(text, lambda: parse(text)))

    def translation(self, domain: str, problem: str, optimize: bool, translate: Callable[[], Any]):
        return self.translations.get((domain, problem, optimize), translate)


#: the process's cache of parsed games (see GameCache); None = none: each ``engine_call``
#: scope then keeps its own, so only the ``load`` + ``reset`` of one game share a translation
GAME_CACHE: GameCache | None = GameCache()
#: TextWorld's parse of a whole game grammar: ``GameLogic`` calls ``_parse_and_convert(text, rule_name=this)``
_GAME_GRAMMAR_RULE = "pddlStart"
_ENGINE_CALL_ACTIVE = False
#: the variable of the placeholder task fast-downward's translator writes for unsolvable problems
_TRANSLATOR_UNSOLVABLE = "Atom dummy(val1)"


@contextlib.contextmanager
def engine_call() -> Iterator[None]:
    """Scope for engine calls that load games or translate PDDL: ``sys.argv`` kept, grammar parses
    and translations served by ``GAME_CACHE``; a nested scope shares the outer one's cache."""
    global _ENGINE_CALL_ACTIVE
    if _ENGINE_CALL_ACTIVE:
        yield
        return
    import fast_downward
    from textworld.envs.pddl import logic as pddl_logic

    cache = GAME_CACHE if GAME_CACHE is not None else GameCache()
    original_translate = fast_downward.pddl2sas
    original_parse = pddl_logic._parse_and_convert
    argv = list(sys.argv)

    def pddl2sas(domain, problem, verbose=False, optimize=False):
        translate = functools.partial(original_translate, domain, problem, verbose=verbose, optimize=optimize)
        return cache.translation(domain, problem, bool(optimize), translate)

    def parse_and_convert(*args, **kwargs):
        if len(args) != 1 or kwargs != {"rule_name": _GAME_GRAMMAR_RULE}:
            return original_parse(*args, **kwargs)  # not a game grammar: TextWorld's own path
        return cache.grammar(args[0], functools.partial(original_parse, rule_name=_GAME_GRAMMAR_RULE))

    fast_downward.pddl2sas = pddl2sas
    pddl_logic._parse_and_convert = parse_and_convert
    _ENGINE_CALL_ACTIVE = True
    try:
        yield
    finally:
        _ENGINE_CALL_ACTIVE = False
        fast_downward.pddl2sas = original_translate
        pddl_logic._parse_and_convert = original_parse
        sys.argv[:] = argv


#: fast-downward library copies of closed engines, handed to the next new engine
_RELEASED_LIBS: list[Any] = []
#: the memfds of this process's library copies, open for its lifetime: a closed one's number would be
#: reused, and dlopen of a path it has loaded before hands back that copy instead of a new one
_LIBRARY_FDS: list[int] = []


@functools.lru_cache(maxsize=1)
def _library_bytes() -> bytes:
    """``libdownward.so`` as fast-downward installs it, read once per process."""
    from fast_downward import interface

    return Path(interface.DOWNWARD_LIB_PATH).read_bytes()


def load_library():
    """A new copy of fast-downward's library, as ``fast_downward.load_lib`` makes one (the same
    function signatures), but loaded from an in-memory file (memfd) of the bytes this process read
    once, not from a copy on disk (module doc). Where memfd is missing (not Linux): ``load_lib``."""
    import ctypes

    from fast_downward import interface

    if not hasattr(os, "memfd_create"):
        return interface.load_lib()
    fd = os.memfd_create("libdownward.so")
    _LIBRARY_FDS.append(fd)
    with open(fd, "wb", closefd=False) as fh:
        fh.write(_library_bytes())
    path = f"/proc/self/fd/{fd}"
    saved = interface.shutil, interface.cdll  # load_lib copies the file, then loads the copy: neither, here
    interface.shutil = _NoCopy
    interface.cdll = _FromMemory(path, ctypes.CDLL)
    try:
        return interface.load_lib()
    finally:
        interface.shutil, interface.cdll = saved


class _NoCopy:
    """``shutil`` as ``fast_downward.load_lib`` sees it in ``load_library``: its copy is not made."""

    @staticmethod
    def copyfile(source, target):
        return target


class _FromMemory:
    """``ctypes.cdll`` as ``fast_downward.load_lib`` sees it in ``load_library``: loads the memfd."""

    def __init__(self, path: str, loader):
        self.path, self.loader = path, loader

    def LoadLibrary(self, _ignored):  # noqa: N802 (ctypes' name)
        return self.loader(self.path)


def make_engine():
    """A fresh engine: ``PddlEnv`` -> ``AlfredDemangler`` -> ``AlfredInfos`` (load with a game)."""
    tw_env = import_alfworld("agents.environment.alfred_tw_env")
    import fast_downward
    import textworld
    from textworld.envs import PddlEnv

    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    original = fast_downward.load_lib
    fast_downward.load_lib = _RELEASED_LIBS.pop if _RELEASED_LIBS else load_library
    try:
        core = PddlEnv(infos)
    finally:
        fast_downward.load_lib = original
    return tw_env.AlfredInfos(tw_env.AlfredDemangler(core, shuffle=False))


def load_game(engine, game: str | os.PathLike | dict):
    """Load a game (a ``game.tw-pddl`` path or its parsed JSON) and start it: TextWorld's first state."""
    with engine_call():
        engine.load(game if isinstance(game, dict) else str(game))
        return engine.reset()


def replan(engine) -> list[str]:
    """The fast-downward planner's commands from the engine's current state (the call behind
    TextWorld's ``policy_commands``); [] when the goal holds already or cannot be reached."""
    core = engine.unwrapped
    return list(core._pddl_state.replan(core._entity_infos))


def close_engine(engine) -> None:
    """Hand the engine's copy of fast-downward's library to the next engine: unloading it
    (``fast_downward.close_lib``) crashes the next ``load_lib``; ``load_sas`` resets a reused copy."""
    lib = getattr(engine.unwrapped, "downward_lib", None)
    if lib is not None:
        engine.unwrapped.downward_lib = None
        _RELEASED_LIBS.append(lib)


def plan_game(engine, game: dict) -> tuple[bool, list[str]]:
    """Load ``game`` (parsed JSON) without starting it: (goal already holds, planner's plan). A goal
    the translator proves unreachable gives a dummy task TextWorld cannot load: (False, []) then."""
    import fast_downward

    with engine_call():
        _, sas = fast_downward.pddl2sas(game["pddl_domain"], game["pddl_problem"])
        if _TRANSLATOR_UNSOLVABLE in sas:
            return False, []
        engine.load(game)
        return bool(engine.unwrapped._pddl_state.check_goal()), replan(engine)

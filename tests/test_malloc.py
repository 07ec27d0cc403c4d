"""gentax.malloc: glibc takes the settings, children inherit them, a user's exported value wins,
and a value mallopt's int cannot hold is clamped rather than wrapped."""

from __future__ import annotations

import subprocess
import sys

from gentax import malloc


def test_glibc_takes_the_settings_and_children_inherit_them(monkeypatch):
    for _, env in malloc.SETTINGS.values():
        monkeypatch.delenv(env, raising=False)
    monkeypatch.setenv("MALLOC_TOP_PAD_", str(1 << 20))  # the user's value wins
    assert malloc.tune()  # Linux with glibc: mallopt accepted every value
    child = subprocess.run([sys.executable, "-c", "import os; print(os.environ['MALLOC_MMAP_THRESHOLD_'], "
                            "os.environ['MALLOC_TRIM_THRESHOLD_'], os.environ['MALLOC_TOP_PAD_'])"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.split() == [str(32 << 20), str(1 << 30), str(1 << 20)]


def test_a_value_past_c_int_is_clamped_for_mallopt_not_wrapped(monkeypatch):
    """mallopt takes an int; ctypes would wrap 4 GiB to 0 (trim at every free). glibc's own
    environment variable takes it whole, so the children get it as exported."""
    calls = []

    class Mallopt:  # a stand-in for libc's, recording what it is given
        argtypes = None

        def __call__(self, param, value):
            calls.append((param, value))
            return 1

    import ctypes
    import types

    monkeypatch.setattr(ctypes, "CDLL", lambda name: types.SimpleNamespace(mallopt=Mallopt()))
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", str(4 << 30))
    assert malloc.tune()
    assert (-1, 2**31 - 1) in calls

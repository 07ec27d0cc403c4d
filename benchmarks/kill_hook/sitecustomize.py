"""Fault hook of benchmarks/kill_points.py: with this folder on PYTHONPATH, every Python process
wraps the rename that completes each atomic write (``gentax.io._commit``):

- ``GENTAX_KILL_LOG=FILE``: append the final path of every completed write to FILE (a write inside
  another write's temporary folder with that folder shown as ``<tmp>``);
- ``GENTAX_KILL_AT=PATH`` (and ``GENTAX_KILL_NTH=K``, default 1): SIGKILL this process at its K-th
  write of PATH, after the temporary is complete and before the rename.

Without those variables it does nothing (and imports nothing).
"""

import os

if os.environ.get("GENTAX_KILL_LOG") or os.environ.get("GENTAX_KILL_AT"):
    import re
    import signal

    try:
        from gentax import io as _gio
    except ImportError:  # another environment on the same PYTHONPATH (LlamaFactory's): nothing to wrap
        _gio = None
    if _gio is not None:
        _real_commit = _gio._commit
        _seen = {}

        def _commit(target, path):
            # a write inside another write's temporary: its random name shown as <tmp>
            where = re.sub(r"/\.[^/]+\.[A-Za-z0-9_]{8}\.tmp/", "/<tmp>/", os.path.abspath(path))
            _seen[where] = _seen.get(where, 0) + 1
            if where == os.environ.get("GENTAX_KILL_AT") and _seen[where] == int(os.environ.get("GENTAX_KILL_NTH", "1")):
                os.kill(os.getpid(), signal.SIGKILL)
            _real_commit(target, path)
            if os.environ.get("GENTAX_KILL_LOG"):
                with open(os.environ["GENTAX_KILL_LOG"], "a") as log:
                    log.write(where + "\n")

        _gio._commit = _commit

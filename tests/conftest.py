"""How the suite is split over parallel workers (pytest-xdist; scripts/test.sh runs
``-n 2 --dist loadfile --no-loadscope-reorder``): each test module runs whole on one worker (its
module-scoped fixtures are built once), modules handed out in collection order.

The SLURM smoke's module (marked ``slurm``) is collected first: it is the longest chain of tests and
mostly waits on the scheduler, so the other worker runs the rest meanwhile. The order of the tests
inside a module is kept (the smoke's tests build on one another's results).
"""

import pytest


def pytest_collection_modifyitems(config, items):
    slurm_modules = {item.path for item in items if item.get_closest_marker("slurm")}
    items.sort(key=lambda item: item.path not in slurm_modules)  # stable: file order otherwise

"""How the suite is split over parallel workers (pytest-xdist; scripts/test.sh runs
``-n 2 --dist loadfile --no-loadscope-reorder``): each test module runs whole on one worker (its
module-scoped fixtures are built once), modules handed out in collection order.

The SLURM smoke's module (marked ``slurm``) is collected first: it is the longest chain of tests and
mostly waits on the scheduler, so the other worker runs the rest meanwhile. The order of the tests
inside a module is kept (the smoke's tests build on one another's results).

The workers share one folder for the test run (``$GENTAX_TEST_DRY_RUNS``): the workflow tests'
dry-runs, each run once for both workers (tests/snakemake_plans.py dry_run_text).
"""

import os
import shutil
import tempfile

import pytest
from snakemake_plans import SHARED_DIR_ENV


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller (or the one process of -n 0): workers inherit it
        config._gentax_shared_dir = tempfile.mkdtemp(prefix="gentax-test-run-")
        os.environ[SHARED_DIR_ENV] = config._gentax_shared_dir


def pytest_unconfigure(config):
    shared = getattr(config, "_gentax_shared_dir", None)
    if shared:
        shutil.rmtree(shared, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    slurm_modules = {item.path for item in items if item.get_closest_marker("slurm")}
    items.sort(key=lambda item: item.path not in slurm_modules)  # stable: file order otherwise

"""How the suite is split over parallel workers (pytest-xdist; scripts/test.sh runs
``-n 2 --dist loadfile --no-loadscope-reorder``): each test module runs whole on one worker (its
module-scoped fixtures are built once), modules handed out in collection order.

The SLURM smoke's module (marked ``slurm``) is collected first: it is the longest chain of tests and
mostly waits on the scheduler, so the other worker runs the rest meanwhile. Then the modules of
LONGEST_FIRST, in its order, then the others in file order: a worker finishing a module takes the
next one, so with the long ones handed out first the two workers end close together (in file order
a long module can come last and keep one worker busy alone at the end). The order of the tests
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


#: the modules that take longest, longest first (`bash scripts/test.sh --durations=0`, summed per
#: module, 2026-12-03: each 25-110 s on the 2-core CI machine); a module not named keeps its file order after them
LONGEST_FIRST = ("test_cost", "test_entry_points", "test_local_engine", "test_generators", "test_dtype", "test_faults",
                 "test_plan_checks", "test_controls", "test_sft", "test_llama_decode", "test_power", "test_verl_ray",
                 "test_profiles", "test_domain_protocol", "test_sciworld", "test_readme", "test_cpu_inference",
                 "test_job_settings", "test_mixture", "test_filler")


def pytest_collection_modifyitems(config, items):
    slurm_modules = {item.path for item in items if item.get_closest_marker("slurm")}
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    # stable: the tests of a module stay in their order, unnamed modules in file order
    items.sort(key=lambda item: (item.path not in slurm_modules, rank.get(item.path.stem, len(rank))))


@pytest.fixture(scope="session")
def cut_model_folder(tmp_path_factory):
    """The embedded model cut to its first layers (tests/rl_helpers.py), made once per test process."""
    from rl_helpers import make_cut_embedded_model

    return make_cut_embedded_model(tmp_path_factory.mktemp("cut"))

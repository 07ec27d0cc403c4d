#!/usr/bin/env bash
# The test command (README, first lines): sets up on first use (scripts/setup.sh: idempotent),
# then runs the unit and integration tests, `snakemake --lint`, and the SLURM smoke test against a
# throwaway local SLURM cluster that the tests start themselves (scripts/slurm-local.sh).
# Two pytest-xdist workers, each test module whole on one (tests/conftest.py says how the suite is
# split); `-n 0` runs it in one process. Arguments go to pytest: `bash scripts/test.sh tests/test_cost.py -k gres`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
# One thread per test process: OpenMP's waiting threads of two workers spin against each other
# otherwise. Jobs that Snakemake starts get their rule's threads (it sets OMP_NUM_THREADS per job).
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
exec bash scripts/run.sh python -m pytest -q -p no:cacheprovider --durations=25 -n 2 --dist loadfile --no-loadscope-reorder "$@"

#!/usr/bin/env bash
# The test command (README "Test"): installs what is missing (idempotent), then runs the unit and
# integration tests, `snakemake --lint`, and the SLURM smoke test against a throwaway local
# SLURM cluster that the tests start themselves (scripts/slurm-local.sh).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
bash scripts/setup.sh
VENV=${GENTAX_VENV:-/opt/gentax/venv}
export PATH="$VENV/bin:$PATH"
# Test this checkout, whichever checkout the venv was set up from.
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
python -m pytest -q -p no:cacheprovider --durations=25 "$@"

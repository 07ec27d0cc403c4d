#!/usr/bin/env bash
# The run command (README, first lines): `bash scripts/run.sh` runs the whole embedded study.
# It is `snakemake` from the gentax venv (made by scripts/setup.sh), in this checkout, with any
# snakemake flags passed on: `bash scripts/run.sh -n` (the plan), `bash scripts/run.sh --profile
# profiles/slurm` (the paper's study on a SLURM cluster), `bash scripts/run.sh --report report.html`.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
VENV=${GENTAX_VENV:-/opt/gentax/venv}
if [ ! -x "$VENV/bin/snakemake" ]; then
  echo "gentax: no gentax environment at $VENV; set it up first: bash scripts/setup.sh" >&2
  exit 1
fi
cd "$repo"
export PATH="$VENV/bin:$PATH"
exec snakemake "$@"

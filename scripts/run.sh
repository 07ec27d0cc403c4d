#!/usr/bin/env bash
# The run command (README, first lines): `bash scripts/run.sh` runs the whole embedded study,
# setting up on first use (scripts/setup.sh: idempotent, says what it found). Any snakemake flags
# pass on: `bash scripts/run.sh -n` (the plan), `bash scripts/run.sh --profile profiles/slurm`
# (the paper's study on a SLURM cluster). Without a --profile it uses profiles/embedded (the
# embedded study's cores and threads); a --profile you give is the only profile applied, and its
# config: (profiles/slurm: preset=paper) holds under a --config you add (gentax/clone.py).
# A first word naming a tool runs that tool of this clone instead of snakemake:
#   bash scripts/run.sh gentax plan --cost      bash scripts/run.sh tensorboard --logdir results
#   bash scripts/run.sh python -m pytest ...    bash scripts/run.sh snakemake --report report.html
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
VENV=${GENTAX_VENV:-/opt/gentax/venv}
bash "$repo/scripts/setup.sh"
cd "$repo"
export PATH="$repo/bin:$VENV/bin:$PATH"
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
tool=snakemake
case "${1:-}" in
  gentax|snakemake|tensorboard|python) tool=$1; shift ;;
esac
if [ "$tool" = snakemake ]; then
  # profiles/embedded unless you give a profile; --configfile files read first (one Snakemake cannot
  # read is named); a profile's config: kept under your --config (gentax/clone.py snakemake_argv)
  argv_file=$(mktemp)
  trap 'rm -f "$argv_file"' EXIT
  python -m gentax.clone "$@" > "$argv_file"
  mapfile -d '' -t argv < "$argv_file"
  rm -f "$argv_file"
  exec snakemake "${argv[@]}"
fi
exec "$tool" "$@"

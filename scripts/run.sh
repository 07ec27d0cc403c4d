#!/usr/bin/env bash
# The run command (README): `bash scripts/run.sh` runs the whole embedded study, setting up on
# first use (scripts/setup.sh). Snakemake flags pass on (`-n`, `--profile profiles/slurm`); without
# a --profile it uses profiles/embedded (gentax/clone.py). A first word naming a tool runs that tool:
#   bash scripts/run.sh gentax plan --cost      bash scripts/run.sh tensorboard --logdir results/embedded
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
  # the profile, the --configfile files checked, a profile's config: kept (gentax/clone.py snakemake_argv)
  argv_file=$(mktemp)
  trap 'rm -f "$argv_file"' EXIT
  python -m gentax.clone "$@" > "$argv_file"
  mapfile -d '' -t argv < "$argv_file"
  rm -f "$argv_file"
  exec snakemake "${argv[@]}"
fi
exec "$tool" "$@"

#!/usr/bin/env bash
# The run command (README, first lines): `bash scripts/run.sh` runs the whole embedded study,
# setting up on first use (scripts/setup.sh: idempotent, says what it found). Any snakemake flags
# pass on: `bash scripts/run.sh -n` (the plan), `bash scripts/run.sh --profile profiles/slurm`
# (the paper's study on a SLURM cluster). Without a --profile it uses profiles/embedded (the
# embedded study's cores and threads); a --profile you give is the only profile applied.
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
  profile=(--profile profiles/embedded)
  configfiles=() in_configfiles=""
  for arg in "$@"; do
    case "$arg" in
      --profile|--profile=*|--workflow-profile|--workflow-profile=*) profile=() in_configfiles="" ;;
      --configfile|--configfiles) in_configfiles=1 ;;
      -*) in_configfiles="" ;;
      *) [ -n "$in_configfiles" ] && configfiles+=("$arg") ;;
    esac
  done
  # Snakemake reads --configfile files before the Snakefile and names none it cannot read: read them first.
  if [ ${#configfiles[@]} -gt 0 ]; then
    python -c 'import sys
from gentax.errors import ConfigError
from gentax.plan import check_configfiles
try:
    check_configfiles(sys.argv[1:])
except ConfigError as exc:
    sys.exit(f"gentax: error: {exc}")' "${configfiles[@]}"
  fi
  exec snakemake "${profile[@]}" "$@"
fi
exec "$tool" "$@"

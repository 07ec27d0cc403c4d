# source scripts/activate.sh — optional: put this clone's `gentax` (bin/) and the venv's tools
# (`snakemake`, `tensorboard`; scripts/setup.sh) on PATH for this shell. Not needed:
# `bash scripts/run.sh gentax ...` runs the same tools without it.
_gentax_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export GENTAX_VENV=${GENTAX_VENV:-/opt/gentax/venv}
export PATH="$_gentax_repo/bin:$GENTAX_VENV/bin:$PATH"
unset _gentax_repo

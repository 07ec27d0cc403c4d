"""``python tests/snakemake_steady_polling.py ARGS``: ``python -m snakemake ARGS`` whose SLURM executor
plugin waits the profile's ``seconds-between-status-checks`` between every two status checks.

The plugin lengthens that wait by 10 s after each check that finds no job finished (up to 180 s),
which spares a busy cluster's controller; on the SLURM smoke test's one-node cluster, whose jobs
take 10-30 s, it left a finished job unnoticed for up to ~20 s, and the next job unsubmitted
meanwhile, in every wave of the workflow. Only that wait changes: submission, the jobs' own
command (``python -m snakemake``, started by SLURM), resources and status parsing are the plugin's.
"""

import sys

from snakemake.cli import main
from snakemake_executor_plugin_slurm import Executor


def _profile_interval(executor) -> int:
    return executor.workflow.remote_execution_settings.seconds_between_status_checks


# the plugin assigns its lengthened wait to this property after each check: the assignment is dropped
Executor.next_seconds_between_status_checks = property(_profile_interval, lambda executor, seconds: None)

if __name__ == "__main__":
    sys.exit(main())

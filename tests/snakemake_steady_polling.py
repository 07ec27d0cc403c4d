"""``python tests/snakemake_steady_polling.py ARGS``: ``python -m snakemake ARGS`` whose SLURM executor
plugin waits the profile's ``seconds-between-status-checks`` between every two status checks.

The plugin lengthens that wait by 10 s after each check that finds no job finished (up to 180 s),
which spares a busy cluster's controller; on the SLURM smoke test's one-node cluster, whose jobs
take 10-30 s, it left a finished job unnoticed for up to ~20 s, and the next job unsubmitted
meanwhile, in every wave of the workflow.

It also tells the plugin that ``sacct`` is not there. The one-node cluster keeps no accounting
(``sacct``: "Slurm accounting storage is disabled"), and the plugin switches its status queries to
``sacct`` whenever one ``scontrol show config`` call (10 s timeout) does not answer with MinJobAge.
On a loaded 2-core machine that once happened, and the plugin never saw a finished job end: the
workflow waited 20 minutes on it (2026-12-05, jobs done, the job purged from squeue after MinJobAge).
With ``squeue`` alone, which sees a job for MinJobAge = 300 s after it ends, status is what the
plugin reads when MinJobAge is read. Only that wait and that answer change: submission, the jobs'
own command (``python -m snakemake``, started by SLURM), resources and status parsing are the
plugin's.
"""

import sys

import snakemake_executor_plugin_slurm as slurm_plugin
from snakemake.cli import main
from snakemake_executor_plugin_slurm import Executor


def _profile_interval(executor) -> int:
    return executor.workflow.remote_execution_settings.seconds_between_status_checks


# the plugin assigns its lengthened wait to this property after each check: the assignment is dropped
Executor.next_seconds_between_status_checks = property(_profile_interval, lambda executor, seconds: None)
# the test cluster has no accounting: sacct would answer nothing (module docstring)
_tool_available = slurm_plugin.is_query_tool_available
slurm_plugin.is_query_tool_available = lambda tool: tool != "sacct" and _tool_available(tool)

if __name__ == "__main__":
    sys.exit(main())

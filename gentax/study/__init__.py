"""The study layer: what the study consists of (the plan), where each artifact lives (paths) and
what each job receives (job specs). The Snakefile's rules read only this layer."""

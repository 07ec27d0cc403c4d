# Thin entry point: rule -> this script -> gentax.pipeline.controls_properties_table (the logic lives there).
import _gentax_path  # noqa: F401  (this checkout's gentax first on sys.path)
from gentax import pipeline

pipeline.controls_properties_table(snakemake)  # noqa: F821  (injected by Snakemake's script directive)

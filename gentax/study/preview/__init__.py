"""Previews of a study before it runs: its settings and their sources, the GPU memory check, power (and the cost)."""

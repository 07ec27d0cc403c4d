"""What the study will take before it is launched: cost, power, memory, settings (above the plan)."""

"""gentax: measure what RL post-training of LLM agents costs in generality.

Subpackages follow the study's stages: ``domains`` (environments behind one protocol),
``agent`` (prompts, parsing, property measures; augmentation is ``domains.augment``), ``rollout`` (the collector and
generators), ``train`` (GRPO engines, SFT) and ``analysis`` (tables and figures).
"""

__version__ = "0.1.0"

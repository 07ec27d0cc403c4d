"""Registers gentax's verl rollout backend ``hf`` (gentax/train/verl_hf_rollout.py) with verl.

verl imports every module named in ``VERL_USE_EXTERNAL_MODULES`` when ``verl`` itself is imported
(verl/__init__.py), in every process: the driver, the TaskRunner, the FSDP workers and the agent
loops. ``verl_engine.verl_overrides`` puts ``verl_engine.PLUGIN_ENV`` (this module) into the Ray runtime environment, so
``rollout.name=hf`` resolves on both sides without patching verl:
- trainer side: ``RolloutReplicaRegistry`` (verl/workers/rollout/replica.py) -> ``HFReplica``;
- worker side: ``_ROLLOUT_REGISTRY`` (verl/workers/rollout/base.py) -> ``HFServerAdapter``.
Both point at the implementation module by name, so importing this module stays cheap.
"""

from __future__ import annotations

from verl.workers.rollout import base as _rollout_base
from verl.workers.rollout.replica import RolloutReplicaRegistry

NAME = "hf"
MODULE = "gentax.train.verl_hf_rollout"


def _load_replica():
    from gentax.train.verl_hf_rollout import HFReplica

    return HFReplica


def register() -> None:
    """Idempotent: add ``hf`` to both of verl's registries."""
    RolloutReplicaRegistry.register(NAME, _load_replica)
    _rollout_base._ROLLOUT_REGISTRY[(NAME, "async")] = f"{MODULE}.HFServerAdapter"


register()

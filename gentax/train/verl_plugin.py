"""Registers gentax's verl rollout backend ``hf`` (gentax/train/verl_hf_rollout.py) with verl.

verl imports every module named in ``VERL_USE_EXTERNAL_MODULES`` (``verl_engine.PLUGIN_ENV``, set
for the Ray workers) on ``import verl``, in every process, so ``rollout.name=hf`` resolves on both
sides without patching verl: ``RolloutReplicaRegistry`` -> ``HFReplica`` (trainer side) and
``_ROLLOUT_REGISTRY`` -> ``HFServerAdapter`` (worker side), both by name, so this import stays cheap.
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

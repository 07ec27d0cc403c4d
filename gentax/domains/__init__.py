"""Agent domains behind one protocol (see ``gentax.domains.base`` for the contract).

``make(name, split=..., seed=..., **options)`` builds an environment by name. What a domain is
(env class, prompt, action syntax, augmentation, knobs, expert) is its ``DomainSpec``, one per
domain module, collected by the registry in ``gentax.domains.spec``; ``DOMAINS`` and ``REGISTRY``
are derived from it. Env classes are imported on first use (no JVM until SciWorld is stepped).
"""

from __future__ import annotations


from gentax.domains.base import (  # noqa: F401  (re-exported protocol)
    INVALID_PENALTY,
    SPLITS,
    SUCCESS_REWARD,
    DomainEnv,
    InvalidAction,
    Observation,
    Task,
)
import gentax.domains.spec as _registry  # not "from ... import spec": gentax.domains.spec stays the submodule
from gentax.domains.spec import DomainSpec, names, specs  # noqa: F401  (the registry)


def __getattr__(name: str):
    # derived from the domain specs (gentax.domains.spec), built on first use
    if name == "DOMAINS":
        return names()
    if name == "REGISTRY":  # domain name -> "module:Class"
        return {d: s.env for d, s in specs().items()}
    raise AttributeError(name)


def domain_class(name: str) -> type[DomainEnv]:
    return _registry.spec(name).env_class()


def make(name: str, split: str = "train", seed: int = 0, **options) -> DomainEnv:
    """Build the environment of domain ``name`` (see ``gentax.domains.base``)."""
    return domain_class(name)(split=split, seed=seed, **options)

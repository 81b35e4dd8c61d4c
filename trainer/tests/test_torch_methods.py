"""Every training method end to end through the real command line, on a tiny
Llama model and a byte-level BPE tokenizer built here from real
conversations (HH-RLHF), so nothing is downloaded.

These need torch, transformers and peft: the trainer's environment
(make trainer-env), which make test runs them under. Elsewhere they are
skipped with the missing package named, and under CI=true they fail.
CURATE_TRAINER_TEST_DEVICE picks the device (default cpu).
"""

import gzip
import json
import math
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

import publicdata
from curate_trainer.chat import ChatFormat
from curate_trainer.data import Message

# In dependency order, so the skip names the most basic missing package.
try:
    import torch
    import transformers
    import peft
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    MISSING = None
except ImportError as e:
    MISSING = e.name or str(e)

TRAINER_DIR = Path(__file__).resolve().parents[1]
DEVICE = os.environ.get("CURATE_TRAINER_TEST_DEVICE", "cpu")
CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
REJECTED = "no no no no no no no no"  # one fixed, easily told apart bad reply
TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
TURN = re.compile(r"\n\n(Human|Assistant): ")


def hh_conversations(path, limit):
    """Single-turn HH-RLHF conversations with short texts: (question, chosen reply)."""
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            parts = TURN.split(json.loads(line)["chosen"])
            if len(parts) != 5 or parts[0] or parts[1] != "Human" or parts[3] != "Assistant":
                continue
            question, reply = parts[2].strip(), parts[4].strip()
            if question and reply and len(question) <= 200 and len(reply) <= 300:
                rows.append((question, reply))
            if len(rows) == limit:
                break
    return rows


def chat_line(question, reply):
    return {"messages": [{"role": "user", "content": question}, {"role": "assistant", "content": reply}]}


def preference_line(question, reply, rated):
    line = {"prompt": [{"role": "user", "content": question}],
            "chosen": [{"role": "assistant", "content": reply}],
            "rejected": [{"role": "assistant", "content": REJECTED}]}
    if rated:
        line.update(rating_chosen=5, rating_rejected=1)
    return line


def write_jsonl(path, lines):
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")


def build_model_dir(path, texts, chat_template):
    """A 2-layer Llama with hidden size 32 and a 400-token byte-level BPE vocabulary,
    with the given chat template (None: the plain layout, with </s> as EOS)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<pad>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    eos = "<|im_end|>" if chat_template else "</s>"
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token=eos,
                                                     pad_token="<pad>")
    if chat_template:
        tokenizer.chat_template = chat_template
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
        # Wider than the usual 0.02 so the frozen output layer can express a
        # clearly non-uniform next-token distribution once the adapter moves.
        initializer_range=0.1,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id)
    transformers.LlamaForCausalLM(config).save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def metric_events(events, key):
    return [e for e in events if e["event"] == "metric" and key in e]


def mean(values):
    return sum(values) / len(values)


def setUpModule():
    if MISSING and os.environ.get("CI") == "true":
        raise RuntimeError(f"{MISSING} is not installed for {sys.executable}: CI runs these under the trainer's "
                           "environment (make trainer-env)")


@unittest.skipIf(MISSING, f"needs torch, transformers and peft, and {MISSING} is not installed for "
                          f"{sys.executable}: run them under the trainer's environment (make trainer-env)")
class TrainerMethodsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # Real conversations (public data): without them the class skips,
        # before it makes anything to clean up.
        hh_rlhf = publicdata.path("hh-rlhf", "harmless-base-test.part1.jsonl.gz")
        cls._tmp = tempfile.TemporaryDirectory()
        cls.root = Path(cls._tmp.name)
        cls.rows = hh_conversations(hh_rlhf, 40)
        assert len(cls.rows) == 40, "not enough short HH-RLHF conversations"
        texts = [q + "\n" + a for q, a in cls.rows] + [REJECTED, "user: assistant: system:"]
        cls.chat_model = build_model_dir(cls.root / "tiny-chat", texts, CHATML)
        cls.plain_model = build_model_dir(cls.root / "tiny-plain", texts, None)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def run_dir(self, name):
        path = self.root / name
        path.mkdir()
        return path

    def run_trainer(self, run_dir, cfg, timeout=900):
        (run_dir / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
        proc = subprocess.run([sys.executable, "-m", "curate_trainer", "run", str(run_dir / "config.json")],
                              cwd=TRAINER_DIR, capture_output=True, text=True, timeout=timeout)
        events = [json.loads(line) for line in proc.stdout.splitlines()]
        self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])
        self.assertEqual(events[-1], {"event": "done"})
        return events

    def assert_adapter(self, path):
        self.assertTrue((path / "adapter_config.json").is_file(), path)
        self.assertTrue((path / "adapter_model.safetensors").is_file(), path)

    def assert_metrics_file(self, run_dir, events):
        records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
        for r in records:
            self.assertRegex(r["ts"], TS)
        metrics = [e for e in events if e["event"] == "metric"]
        recorded = [r for r in records if "step" in r and r["phase"] != "STOPPED"]
        self.assertEqual(len(recorded), len(metrics))
        for event, record in zip(metrics, recorded):
            self.assertEqual({k: v for k, v in record.items() if k not in ("ts", "phase")},
                             {k: v for k, v in event.items() if k != "event"})
        return records

    def test_sft_learns_and_the_adapter_changes_outputs(self):
        run_dir = self.run_dir("sft")
        write_jsonl(run_dir / "train.jsonl", [chat_line(q, a) for q, a in self.rows[:24]])
        write_jsonl(run_dir / "eval.jsonl", [chat_line(q, a) for q, a in self.rows[24:32]])
        events = self.run_trainer(run_dir, {
            "method": "sft", "base_model": str(self.chat_model), "device": DEVICE, "seed": 1,
            "hyperparameters": {"lora_r": 16, "lora_alpha": 32, "lora_dropout": 0.0,
                                "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj",
                                                   "gate_proj", "up_proj", "down_proj"],
                                "learning_rate": 1e-2, "epochs": 5, "batch_size": 4, "max_length": 128,
                                "lr_scheduler": "constant"},
        })
        losses = [e["loss"] for e in metric_events(events, "loss")]
        self.assertEqual(len(losses), 5 * 6)  # 24 examples in batches of 4, five epochs
        self.assertLess(mean(losses[-5:]), 0.97 * mean(losses[:5]), losses)
        evals = [e["eval_loss"] for e in metric_events(events, "eval_loss")]
        self.assertEqual(len(evals), 5)  # after each epoch
        self.assertTrue(all(0 < v < 20 for v in evals), evals)
        self.assertIn({"event": "artifact", "path": "final", "kind": "adapter"}, events)
        records = self.assert_metrics_file(run_dir, events)
        self.assertEqual({r["phase"] for r in records}, {"TRAINING", "EVALUATING"})
        self.assertIn("train.log", os.listdir(run_dir))

        # The saved adapter loads onto the base model and changes what it predicts.
        base = transformers.AutoModelForCausalLM.from_pretrained(str(self.chat_model))
        tuned = peft.PeftModel.from_pretrained(
            transformers.AutoModelForCausalLM.from_pretrained(str(self.chat_model)), str(run_dir / "final"))
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(run_dir / "final"))
        ids = torch.tensor([tokenizer("How do I bake bread?")["input_ids"]])
        with torch.no_grad():
            before = base(input_ids=ids).logits
            after = tuned(input_ids=ids).logits
            again = tuned(input_ids=ids).logits
        self.assertGreater((before - after).abs().max().item(), 1e-3)
        self.assertTrue(torch.equal(after, again))

    def test_dpo_learns_the_preference(self):
        run_dir = self.run_dir("dpo")
        write_jsonl(run_dir / "train.jsonl", [preference_line(q, a, False) for q, a in self.rows[:24]])
        write_jsonl(run_dir / "eval.jsonl", [preference_line(q, a, False) for q, a in self.rows[24:32]])
        events = self.run_trainer(run_dir, {
            "method": "dpo", "base_model": str(self.plain_model), "device": DEVICE, "seed": 2,
            "hyperparameters": {"lora_r": 16, "lora_alpha": 32, "target_modules": "auto", "beta": 0.5,
                                "learning_rate": 1e-2, "epochs": 4, "batch_size": 4, "max_length": 128,
                                "lr_scheduler": "constant"},
        })
        steps = metric_events(events, "loss")
        self.assertEqual(len(steps), 4 * 6)
        # Before the first update the policy is the reference (the adapter starts at
        # zero), so every reward is 0 and the loss is -log sigmoid(0) = log 2.
        self.assertAlmostEqual(steps[0]["loss"], math.log(2), places=4)
        self.assertAlmostEqual(steps[0]["reward_margin"], 0.0, places=5)
        self.assertLess(mean([s["loss"] for s in steps[-4:]]), 0.6)
        self.assertGreater(mean([s["preference_accuracy"] for s in steps[-4:]]), 0.5)
        self.assertGreater(mean([s["reward_margin"] for s in steps[-4:]]), 0.0)
        final_eval = metric_events(events, "eval_preference_accuracy")[-1]
        self.assertGreater(final_eval["eval_preference_accuracy"], 0.5)
        self.assertIn({"event": "artifact", "path": "final", "kind": "adapter"}, events)
        self.assert_adapter(run_dir / "final")
        self.assert_metrics_file(run_dir, events)

    def train_reward_model(self, name, hyperparameters):
        run_dir = self.run_dir(name)
        write_jsonl(run_dir / "train.jsonl", [preference_line(q, a, i % 2 == 0) for i, (q, a) in enumerate(self.rows[:24])])
        write_jsonl(run_dir / "eval.jsonl", [preference_line(q, a, True) for q, a in self.rows[24:32]])
        events = self.run_trainer(run_dir, {
            "method": "reward", "base_model": str(self.chat_model), "device": DEVICE, "seed": 3,
            "hyperparameters": {"lora_r": 16, "lora_alpha": 32, "target_modules": "all-linear",
                                "batch_size": 4, "max_length": 128, "lr_scheduler": "constant",
                                "mse_weight": 0.5, "warmup_steps": 0, "early_stopping_patience": 0,
                                **hyperparameters},
        })
        return run_dir, events

    def test_reward_model_ranks_pairs(self):
        run_dir, events = self.train_reward_model("reward", {"learning_rate": 1e-2, "epochs": 6})
        losses = [e["loss"] for e in metric_events(events, "loss")]
        self.assertEqual(len(losses), 6 * 6)
        self.assertLess(mean(losses[-4:]), mean(losses[:4]), losses)
        evals = metric_events(events, "ranking_accuracy")
        self.assertEqual(len(evals), 6)
        self.assertGreaterEqual(evals[-1]["ranking_accuracy"], 0.75)
        self.assertIn("eval_mse", evals[-1])
        bins = evals[-1]["calibration"]
        self.assertEqual(len(bins), 10)
        self.assertEqual(sum(b["count"] for b in bins), 2 * 8)  # each of the 8 pairs read both ways
        self.assertTrue(0 <= evals[-1]["calibration_error"] <= 1)
        self.assertIn({"event": "artifact", "path": "final", "kind": "reward_model"}, events)

        # final/ is a whole sequence classifier that ranks held-out pairs on its own.
        model = transformers.AutoModelForSequenceClassification.from_pretrained(str(run_dir / "final"))
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(run_dir / "final"))
        fmt = ChatFormat(tokenizer)
        wins = 0
        for question, reply in self.rows[24:32]:
            prompt = (Message("user", question),)
            scores = []
            for text in (reply, REJECTED):
                ids, _ = fmt.encode_pair(prompt, (Message("assistant", text),), 128)
                with torch.no_grad():
                    scores.append(model(input_ids=torch.tensor([ids])).logits[0, 0].item())
            wins += scores[0] > scores[1]
        self.assertGreaterEqual(wins, 6)

    def test_irs_iterates_with_a_reward_model(self):
        reward_dir, _ = self.train_reward_model("irs-reward", {"learning_rate": 1e-2, "max_steps": 3})
        run_dir = self.run_dir("irs")
        write_jsonl(run_dir / "train.jsonl",
                    [{"prompt": [{"role": "user", "content": q}], "context": a} for q, a in self.rows[:6]])
        events = self.run_trainer(run_dir, {
            "method": "irs", "base_model": str(self.chat_model), "device": DEVICE, "seed": 4,
            "hyperparameters": {"max_length": 128},
            "irs": {"n_iterations": 2, "n_candidates": 3, "batch_size": 2, "learning_rate": 1e-3,
                    "max_new_tokens": 12, "n_questions": 4, "reward_model": str(reward_dir / "final"),
                    "dw_config": {"history_window": 3, "temperature": 2.0}},
        })
        samples = [json.loads(line) for line in (run_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
        for it in (1, 2):
            chosen = [s for s in samples if s["iter"] == it]
            self.assertTrue(1 <= len(chosen) <= 4, samples)
            for s in chosen:
                self.assertTrue(s["response"].strip())
                self.assertEqual(set(s["scores"]), {"rel", "faith", "conc", "rm"})
                self.assertTrue(all(0.0 <= v <= 1.0 for v in s["scores"].values()), s)
                self.assertEqual(s["n_candidates"], 3)
        rounds = metric_events(events, "avg_reward")
        self.assertEqual([r["iter"] for r in rounds], [1, 2])
        initial = {"rel": 1.0, "faith": 1.0, "conc": 0.5, "rm": 1.0}
        self.assertEqual(rounds[0]["weights"], initial)
        self.assertEqual(rounds[0]["next_weights"], initial)  # one point: no slope yet
        self.assertEqual(rounds[1]["weights"], initial)
        # After the second round the fresh weights sum to 3, so the total is 0.8 * 3.5 + 0.2 * 3.
        self.assertAlmostEqual(sum(rounds[1]["next_weights"].values()), 3.4, places=9)
        for it in (1, 2):
            self.assert_adapter(run_dir / "checkpoints" / f"iter_{it}")
            self.assertIn({"event": "artifact", "path": f"checkpoints/iter_{it}", "kind": "checkpoint"}, events)
        self.assert_adapter(run_dir / "final")
        records = self.assert_metrics_file(run_dir, events)
        self.assertTrue({"GENERATING", "SCORING", "METRICS", "TRAINING"} <= {r["phase"] for r in records})
        starts = [r for r in records if r["phase"] == "GENERATING"]
        self.assertEqual([(r["iter"], r["progress"]) for r in starts], [(1, 0.0), (2, 50.0)])

    def test_reward_model_recipe_stops_early_and_keeps_the_best(self):
        # The recipe's defaults (batch 16 here cut to 4, cosine, warmup 10%), a learning
        # rate high enough to overfit 24 pairs, and patience 1: the run ends before its
        # 20 epochs with a stop event, and final/ holds the best epoch's weights.
        run_dir, events = self.train_reward_model("reward-early", {
            "learning_rate": 5e-2, "epochs": 20, "lr_scheduler": "cosine", "early_stopping_patience": 1,
            "warmup_steps": None})
        evals = metric_events(events, "ranking_accuracy")
        stops = [e for e in events if e["event"] == "stop"]
        [best] = [e for e in events if e["event"] == "metric" and "best_epoch" in e]
        self.assertEqual(len(stops), 1, [e["eval_loss"] for e in evals])
        self.assertLess(len(evals), 20)
        self.assertEqual(best["best_eval_loss"], min(e["eval_loss"] for e in evals))
        self.assertIn(f"the model from epoch {best['best_epoch']} is kept", stops[0]["reason"])
        self.assertIn({"event": "artifact", "path": "final", "kind": "reward_model"}, events)

    def test_grpo_and_ppo_raise_the_reward(self):
        reward_dir, _ = self.train_reward_model("policy-reward", {"learning_rate": 1e-2, "max_steps": 3})
        for method in ("grpo", "ppo"):
            with self.subTest(method=method):
                run_dir = self.run_dir(method)
                write_jsonl(run_dir / "train.jsonl",
                            [{"prompt": [{"role": "user", "content": q}], "context": a} for q, a in self.rows[:8]])
                write_jsonl(run_dir / "eval.jsonl",
                            [{"prompt": [{"role": "user", "content": q}], "context": a} for q, a in self.rows[8:10]])
                events = self.run_trainer(run_dir, {
                    "method": method, "base_model": str(self.chat_model), "device": DEVICE, "seed": 5,
                    "hyperparameters": {"learning_rate": 1e-2, "epochs": 3, "batch_size": 2, "max_length": 128,
                                        "lr_scheduler": "constant"},
                    "policy": {"group_size": 4, "max_new_tokens": 12, "kl_max": 50.0, "holdout_every": 4, "holdout_patience": 100,
                               "reward_model": str(reward_dir / "final"), "weights": {"rm": 1.0, "conc": 0.5}},
                })
                steps = [e for e in events if e["event"] == "metric" and "reward" in e]
                self.assertEqual([s["step"] for s in steps], list(range(1, 13)))
                for s in steps:
                    self.assertTrue(0 <= s["clip_fraction"] <= 1, s)
                    self.assertGreaterEqual(s["kl"], 0.0)
                    self.assertEqual(set(s["reward_breakdown"]), {"rm", "conc"})
                    self.assertEqual("value_loss" in s, method == "ppo")
                self.assertEqual(steps[0]["kl"], 0.0)  # the adapter starts at zero
                self.assertGreater(steps[-1]["kl"], 0.0)
                checks = metric_events(events, "heldout_score")
                self.assertEqual([c["step"] for c in checks], [0, 4, 8, 12])
                self.assertIn({"event": "artifact", "path": "final", "kind": "adapter"}, events)
                self.assert_adapter(run_dir / "final")
                self.assert_metrics_file(run_dir, events)

    def test_grpo_stops_at_the_kl_bound(self):
        run_dir = self.run_dir("grpo-kl")
        write_jsonl(run_dir / "train.jsonl", [{"prompt": [{"role": "user", "content": q}]} for q, _ in self.rows[:8]])
        events = self.run_trainer(run_dir, {
            "method": "grpo", "base_model": str(self.chat_model), "device": DEVICE, "seed": 6, "eval_file": None,
            "hyperparameters": {"learning_rate": 5e-2, "epochs": 20, "batch_size": 2, "max_length": 128,
                                "lr_scheduler": "constant"},
            "policy": {"group_size": 4, "max_new_tokens": 12, "kl_max": 1e-3, "kl_coef": 0.0},
        })
        [stop] = [e for e in events if e["event"] == "stop"]
        self.assertRegex(stop["reason"], r"^KL divergence from the reference reached \S+ after step \d+, above the "
                                         r"bound 0\.001")
        self.assertLess(stop["step"], 20 * 4)
        self.assert_adapter(run_dir / "final")

    def test_sigterm_saves_a_partial_checkpoint(self):
        run_dir = self.run_dir("cancel")
        write_jsonl(run_dir / "train.jsonl", [chat_line(q, a) for q, a in self.rows[:24]])
        (run_dir / "config.json").write_text(json.dumps({
            "method": "sft", "base_model": str(self.chat_model), "device": DEVICE, "eval_file": None,
            "hyperparameters": {"learning_rate": 1e-3, "epochs": 100, "batch_size": 2, "max_length": 128},
        }), encoding="utf-8")
        with open(run_dir / "stderr.txt", "w") as stderr:
            proc = subprocess.Popen([sys.executable, "-m", "curate_trainer", "run", str(run_dir / "config.json")],
                                    cwd=TRAINER_DIR, stdout=subprocess.PIPE, stderr=stderr, text=True)
            lines = queue.Queue()

            def read():
                for line in proc.stdout:
                    lines.put(line)
                lines.put(None)

            threading.Thread(target=read, daemon=True).start()
            events = []
            try:
                while not any(e["event"] == "metric" and e["step"] >= 2 for e in events):
                    line = lines.get(timeout=300)
                    self.assertIsNotNone(line, "the trainer ended before it was cancelled")
                    events.append(json.loads(line))
                sent = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                code = proc.wait(timeout=120)
                elapsed = time.monotonic() - sent
            finally:
                if proc.poll() is None:
                    proc.kill()
            while (line := lines.get(timeout=30)) is not None:
                events.append(json.loads(line))
        self.assertEqual(code, 143)
        self.assertLess(elapsed, 60)
        self.assertEqual(events[-1], {"event": "error", "message": "cancelled"})
        [artifact] = [e for e in events if e["event"] == "artifact"]
        self.assertEqual(artifact["kind"], "checkpoint")
        self.assertRegex(artifact["path"], r"^checkpoints/step_\d+$")
        checkpoint = run_dir / artifact["path"]
        self.assert_adapter(checkpoint)
        self.assertFalse((run_dir / "final").exists())
        model = peft.PeftModel.from_pretrained(
            transformers.AutoModelForCausalLM.from_pretrained(str(self.chat_model)), str(checkpoint))
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([[1, 2, 3]])).logits
        self.assertTrue(torch.isfinite(logits).all())

    def test_require_gpu(self):
        run_dir = self.run_dir("gpu")
        write_jsonl(run_dir / "train.jsonl", [chat_line(q, a) for q, a in self.rows[:4]])
        cfg = {"method": "sft", "base_model": str(self.chat_model), "require_gpu": True,
               "hyperparameters": {"max_steps": 1, "max_length": 64}}
        if torch.cuda.is_available():
            events = self.run_trainer(run_dir, cfg)
            self.assertIn({"event": "artifact", "path": "final", "kind": "adapter"}, events)
        else:
            (run_dir / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
            proc = subprocess.run([sys.executable, "-m", "curate_trainer", "run", str(run_dir / "config.json")],
                                  cwd=TRAINER_DIR, capture_output=True, text=True, timeout=300)
            events = [json.loads(line) for line in proc.stdout.splitlines()]
            self.assertEqual(proc.returncode, 1)
            self.assertTrue(events[-1]["message"].startswith("no GPU available"), events[-1])

    def test_probe_reports_the_stack(self):
        proc = subprocess.run([sys.executable, "-m", "curate_trainer", "probe"], cwd=TRAINER_DIR,
                              capture_output=True, text=True, timeout=300)
        [probe] = [json.loads(line) for line in proc.stdout.splitlines()]
        self.assertEqual(probe["torch"], torch.__version__)
        self.assertEqual(probe["transformers"], transformers.__version__)
        self.assertEqual(probe["peft"], peft.__version__)
        self.assertEqual(probe["device"], "cuda" if torch.cuda.is_available() else "cpu")
        if torch.cuda.is_available():
            self.assertEqual(probe["gpu_name"], torch.cuda.get_device_name(0))
            self.assertGreater(probe["gpu_memory_bytes"], 0)


if __name__ == "__main__":
    unittest.main()

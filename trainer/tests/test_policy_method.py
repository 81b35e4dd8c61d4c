"""The grpo and ppo methods through the real command-line code (cli.run,
config, data, policy.py, rl.py, guards, the judge over real HTTP, the
protocol and metrics.jsonl) on a CPU with torch alone: tests/toyruntime.py
stands in for the transformers and peft parts of curate_trainer.runtime
(loading a model and tokenizer, generating, saving an adapter).

The judge, a real HTTP server here, scores a reply by the share of its
words that are "good", "great" or "fine".
"""

import io
import json
import logging
import os
import sys
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

try:
    import torch
except ImportError as e:
    # Under CI=true the trainer's environment is there, and a missing torch is a failure.
    if e.name != "torch" or os.environ.get("CI") == "true":
        raise
    raise unittest.SkipTest(
        f"torch is not installed for {sys.executable}; `make trainer-test` runs these "
        "under the trainer's environment (make trainer-env)") from None

import curate_trainer
import toyruntime
from curate_trainer import cli
from curate_trainer.protocol import Emitter
from curate_trainer.stop import StopFlag

PROMPTS = ["tell me about cats", "tell me about dogs", "tell me about birds", "tell me about fish",
           "tell me about cats please", "tell me about dogs please", "tell me about birds now", "tell me about fish now"]


class JudgeHandler(BaseHTTPRequestHandler):
    def do_POST(self):
        items = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["items"]
        scores = []
        for item in items:
            words = item["response"].split()
            scores.append(sum(w in toyruntime.GOOD for w in words) / len(words) if words else 0.0)
        body = json.dumps({"scores": scores}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class PolicyMethodTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ThreadingHTTPServer(("127.0.0.1", 0), JudgeHandler)
        cls.judge = f"http://127.0.0.1:{cls.server.server_port}/score"
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()
        # policy.py and irs.py take the stand-in as their runtime.
        cls.saved = {name: sys.modules.get(name) for name in (
            "curate_trainer.runtime", "curate_trainer.policy", "curate_trainer.irs", "curate_trainer.grpo",
            "curate_trainer.ppo")}
        for name in cls.saved:
            sys.modules.pop(name, None)
        sys.modules["curate_trainer.runtime"] = toyruntime
        cls.had_runtime = getattr(curate_trainer, "runtime", None)
        curate_trainer.runtime = toyruntime

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()
        for name, module in cls.saved.items():
            sys.modules.pop(name, None)
            if module is not None:
                sys.modules[name] = module
        if cls.had_runtime is None:
            del curate_trainer.runtime
        else:
            curate_trainer.runtime = cls.had_runtime

    def setUp(self):
        # cli.run sends the log to stderr and train.log; each test takes its handlers away.
        self.handlers = list(logging.getLogger().handlers)
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self._tmp.name)
        model = self.dir / "toy"
        model.mkdir()
        (model / "config.json").write_text('{"seed": 0}', encoding="utf-8")
        (model / "model.safetensors").write_bytes(b"\0" * 2048)
        lines = [{"prompt": [{"role": "user", "content": p}]} for p in PROMPTS]
        (self.dir / "train.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines[:6]), encoding="utf-8")
        (self.dir / "eval.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines[6:]), encoding="utf-8")

    def tearDown(self):
        root = logging.getLogger()
        for h in list(root.handlers):
            if h not in self.handlers:
                root.removeHandler(h)
                h.close()
        self._tmp.cleanup()

    def run_method(self, method, policy, **hyperparameters):
        cfg = {"method": method, "base_model": "toy", "seed": 3,
               "hyperparameters": {"learning_rate": 0.05, "epochs": 8, "batch_size": 3, "max_length": 64,
                                   "lr_scheduler": "constant", **hyperparameters},
               "policy": {"group_size": 4, "max_new_tokens": 4, "judge_url": self.judge, "micro_batch_size": 5,
                          "holdout_every": 4, **policy}}
        (self.dir / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
        out = io.StringIO()
        code = cli.run(str(self.dir / "config.json"), Emitter(out), StopFlag())
        events = [json.loads(line) for line in out.getvalue().splitlines()]
        self.assertEqual(code, 0, events[-3:])
        self.assertEqual(events[-1], {"event": "done"})
        return events

    def steps(self, events):
        return [e for e in events if e["event"] == "metric" and "reward" in e]

    def adapter(self, where="final"):
        return torch.load(self.dir / where / "adapter.pt")["adapter"]

    def check_run(self, method):
        events = self.run_method(method, {"kl_max": 50.0, "holdout_patience": 100})
        steps = self.steps(events)
        self.assertEqual([s["step"] for s in steps], list(range(1, 17)))  # 6 prompts in 2 batches, 8 epochs
        for s in steps:
            self.assertEqual(set(s) >= {"loss", "lr", "reward", "reward_std", "kl", "clip_fraction",
                                        "response_length", "reward_breakdown"}, True, s)
            self.assertEqual(set(s["reward_breakdown"]), {"judge"})
            self.assertTrue(0 <= s["clip_fraction"] <= 1)
            self.assertEqual("value_loss" in s, method == "ppo")
        self.assertEqual(steps[0]["kl"], 0.0)  # the adapter starts at zero
        self.assertGreater(steps[-1]["kl"], 0.0)
        first, last = sum(s["reward"] for s in steps[:4]) / 4, sum(s["reward"] for s in steps[-4:]) / 4
        self.assertGreater(last, first + 0.15, [round(s["reward"], 3) for s in steps])
        # Held-out checks before the first step and every 4 steps, on the eval file's prompts.
        checks = [e for e in events if e["event"] == "metric" and "heldout_score" in e]
        self.assertEqual([c["step"] for c in checks], [0, 4, 8, 12, 16])
        self.assertNotIn("train_reward", checks[0])  # nothing trained yet: left out as null
        self.assertGreater(checks[-1]["heldout_score"], checks[0]["heldout_score"])
        self.assertFalse(any(e["event"] == "stop" for e in events))
        self.assertIn({"event": "artifact", "path": "final", "kind": "adapter"}, events)
        records = [json.loads(line) for line in (self.dir / "metrics.jsonl").read_text().splitlines()]
        self.assertEqual(len([r for r in records if "reward" in r]), 16)
        self.assertEqual({r["phase"] for r in records}, {"TRAINING", "EVALUATING"})

    def test_grpo_raises_the_judges_reward(self):
        self.check_run("grpo")

    def test_ppo_raises_the_judges_reward(self):
        self.check_run("ppo")

    def test_kl_bound_stops_and_keeps_the_previous_adapter(self):
        # Without the penalty the KL grows by about 0.04 a step here.
        events = self.run_method("grpo", {"kl_max": 0.12, "kl_coef": 0.0, "holdout_patience": 100}, save_steps=1)
        [stop] = [e for e in events if e["event"] == "stop"]
        kl_steps = [(s["step"], s["kl"]) for s in self.steps(events)]
        # The stop comes at the first rollout over the bound; every logged step was within it.
        self.assertTrue(all(kl <= 0.12 for _, kl in kl_steps), kl_steps)
        n = stop["step"]
        self.assertGreater(n, 1)
        self.assertEqual(kl_steps[-1][0], n)
        self.assertRegex(stop["reason"], rf"^KL divergence from the reference reached \S+ after step {n}, above the "
                                         rf"bound 0\.12; the adapter from step {n - 1}, the last within it, is kept$")
        self.assertLess(n, 16)
        self.assertIn({"event": "artifact", "path": "final", "kind": "adapter"}, events)
        # final/ is the adapter saved after step n - 1, not the one after step n.
        self.assertTrue(torch.equal(self.adapter(), self.adapter(f"checkpoints/step_{n - 1}")))
        self.assertFalse(torch.equal(self.adapter(), self.adapter(f"checkpoints/step_{n}")))
        records = [json.loads(line) for line in (self.dir / "metrics.jsonl").read_text().splitlines()]
        self.assertEqual([r["reason"] for r in records if r["phase"] == "STOPPED"], [stop["reason"]])

    def test_reward_hacking_stops_and_keeps_the_best_held_out_adapter(self):
        # The held-out check scores the judge's opposite, so each step that raises the
        # training reward lowers it: the best check is the one before training, whose
        # adapter (all zeros) is the one kept.
        events = self.run_method("grpo", {"kl_max": 50.0, "holdout_weights": {"judge": -1.0},
                                          "holdout_every": 2, "holdout_patience": 2, "holdout_tolerance": 0.01})
        [stop] = [e for e in events if e["event"] == "stop"]
        self.assertRegex(stop["reason"], r"^reward hacking: the training reward rose from \S+ to \S+ while the "
                                         r"held-out score fell from \S+ to \S+ \(2 checks in a row\); the adapter "
                                         r"from step 0, the best held-out score, is kept$")
        self.assertLess(stop["step"], 16)
        self.assertEqual(self.adapter().abs().sum().item(), 0.0)

    def test_bad_policy_settings_fail_before_loading(self):
        cfg = {"method": "grpo", "base_model": "toy", "policy": {"weights": {"rm": 1.0}, "group_size": 1}}
        (self.dir / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
        out = io.StringIO()
        self.assertEqual(cli.run(str(self.dir / "config.json"), Emitter(out), StopFlag()), 1)
        [error] = [json.loads(line) for line in out.getvalue().splitlines()]
        self.assertEqual(error["message"], "invalid config: policy.weights.rm: needs policy.reward_model (what gives "
                                           "this score); policy.group_size: must be between 2 and 64, got 1")


if __name__ == "__main__":
    unittest.main()

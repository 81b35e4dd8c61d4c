"""The parts of gpu_check.py that need no transformers: its verdict on a
run's events, its table, and its refusal, naming what is missing, on a
machine without transformers and peft."""

import importlib.util
import os
import subprocess
import sys
import unittest
from pathlib import Path
from unittest import mock

TRAINER_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TRAINER_DIR))
import gpu_check  # noqa: E402


def metric(step, loss):
    return {"event": "metric", "step": step, "epoch": 1, "loss": loss, "lr": 0.01}


class SummariseTest(unittest.TestCase):
    def test_a_good_run(self):
        events = [{"event": "progress", "phase": "loading"}, metric(1, 2.0), metric(2, 1.5), metric(3, 1.2),
                  {"event": "artifact", "path": "final", "kind": "adapter"}, {"event": "done"}]
        row, problems = gpu_check.summarise("sft", 0, events, [], 3.25)
        self.assertEqual(problems, [])
        self.assertEqual(row, {"method": "sft", "steps": 3, "first": 2.0, "last": 1.2, "seconds": 3.25})

    def test_what_fails_a_row(self):
        flat = [metric(1, 1.0), metric(2, 1.0), {"event": "done"}]
        self.assertEqual(gpu_check.summarise("dpo", 0, flat, [], 1)[1], ["the loss did not move (1)"])
        up = [metric(1, 1.0), metric(2, 1.5), {"event": "done"}]
        self.assertEqual(gpu_check.summarise("reward", 0, up, [], 1)[1], ["the loss went up (1 to 1.5)"])
        # A policy method's loss need not fall, only move.
        self.assertEqual(gpu_check.summarise("grpo", 0, up, [], 1)[1], [])
        failed = [metric(1, 1.0), {"event": "error", "message": "out of GPU memory"}]
        _, problems = gpu_check.summarise("irs", 1, failed, ["the run did not end with done"], 1)
        self.assertEqual(problems, ["the run did not end with done", "exit code 1", "1 loss values; a few steps give more",
                                    "error event: out of GPU memory"])

    def test_table(self):
        rows = [{"method": "sft", "steps": 15, "first": 5.91234, "last": 4.5, "seconds": 6.04, "model": "adapter, loads with peft",
                 "problems": []},
                {"method": "reward", "steps": 0, "first": None, "last": None, "seconds": 1.0, "problems": ["no final/"]}]
        rows[0]["gpus"] = 2
        self.assertEqual(gpu_check.table(rows).splitlines(), [
            "method  gpus  steps  first loss  last loss  saved model               seconds  result",
            "------  ----  -----  ----------  ---------  ------------------------  -------  ------",
            "sft     2     15     5.9123      4.5000     adapter, loads with peft  6.0      ok",
            "reward  0     0      —           —          —                         1.0      FAIL: no final/",
        ])

    def test_report(self):
        rows = [{"method": "sft", "steps": 15, "first": 5.9, "last": 4.5, "seconds": 6.04321, "problems": [],
                 "base_model": "/w/tiny-llama", "artefact": "/w/sft/final", "gpus": 1},
                {"method": "reward", "steps": 0, "first": None, "last": None, "seconds": 1.0,
                 "problems": ["exit code 1", "no final/"], "base_model": "/w/tiny-llama", "artefact": None}]
        got = gpu_check.report("cuda", 1, rows)
        self.assertEqual(got, {"device": "cuda", "gpus": 1, "python": os.path.abspath(sys.executable), "methods": [
            {"method": "sft", "status": "ok", "steps": 15, "loss_first": 5.9, "loss_last": 4.5,
             "base_model": "/w/tiny-llama", "artefact": "/w/sft/final", "seconds": 6.043, "error": "", "gpus": 1},
            {"method": "reward", "status": "failed", "steps": 0, "loss_first": None, "loss_last": None,
             "base_model": "/w/tiny-llama", "artefact": None, "seconds": 1.0, "error": "exit code 1; no final/",
             "gpus": 0}]})

    def test_the_report_path(self):
        with mock.patch.dict(os.environ, {"CURATE_GPU_CHECK_OUT": ""}):
            self.assertEqual(gpu_check.default_out(), gpu_check.REPO_ROOT / ".curate" / "gpu-check.json")
        with mock.patch.dict(os.environ, {"CURATE_GPU_CHECK_OUT": "out/check.json"}):
            self.assertEqual(gpu_check.default_out(), gpu_check.REPO_ROOT / "out" / "check.json")
        with mock.patch.dict(os.environ, {"CURATE_GPU_CHECK_OUT": "/tmp/check.json"}):
            self.assertEqual(gpu_check.default_out(), Path("/tmp/check.json"))

    def test_the_plan_covers_every_method(self):
        methods = [m for m, *_ in gpu_check.plan(Path("/tmp/x"), Path("/tmp/x/model"), "cpu")]
        self.assertEqual(methods, ["sft", "dpo", "reward", "grpo", "ppo", "irs"])


class MissingPackagesTest(unittest.TestCase):
    def test_refuses_loudly_without_the_stack(self):
        missing = [n for n in gpu_check.REQUIRED if importlib.util.find_spec(n) is None]
        self.assertEqual(gpu_check.missing_packages(), missing)
        if not missing:
            return  # a machine with the whole stack runs the check itself (make gpu-check)
        proc = subprocess.run([sys.executable, "gpu_check.py"], cwd=TRAINER_DIR, capture_output=True, text=True,
                              timeout=120)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("gpu-check: NOT RUN: ", proc.stderr)
        self.assertIn("cannot import " + ", ".join(missing), proc.stderr)
        self.assertEqual(proc.stdout, "")


if __name__ == "__main__":
    unittest.main()

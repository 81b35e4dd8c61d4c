"""The real command line in a subprocess: every stdout line is one JSON
event, and each early failure ends with one error event naming its cause.
None of these runs reach model loading, so they need no torch."""

import importlib.util
import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

TRAINER_DIR = Path(__file__).resolve().parents[1]
HAVE_TORCH = importlib.util.find_spec("torch") is not None
LFS_POINTER = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"0" * 64 + b"\nsize 9\n"


def run_cli(*args, timeout=120):
    proc = subprocess.run([sys.executable, "-m", "curate_trainer", *args], cwd=TRAINER_DIR,
                          capture_output=True, text=True, timeout=timeout)
    events = [json.loads(line) for line in proc.stdout.splitlines()]  # fails on any non-JSON line
    return proc, events


class CliTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.run_dir = Path(self._tmp.name)

    def tearDown(self):
        self._tmp.cleanup()

    def fake_model(self):
        path = self.run_dir / "model"
        path.mkdir()
        (path / "config.json").write_text('{"model_type": "llama"}', encoding="utf-8")
        (path / "model.safetensors").write_bytes(b"\0" * 2048)
        return path

    def run_config(self, cfg):
        path = self.run_dir / "config.json"
        path.write_text(json.dumps(cfg), encoding="utf-8")
        return run_cli("run", str(path))

    def assert_one_error(self, proc, events, starts_with):
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertEqual(len(events), 1, events)
        self.assertEqual(events[0]["event"], "error")
        self.assertTrue(events[0]["message"].startswith(starts_with), events[0]["message"])
        return events[0]["message"]

    def test_invalid_config(self):
        proc, events = self.run_config({"method": "sft", "base_model": "m", "hyperparameters": {"lora_r": 0}})
        self.assert_one_error(proc, events, "invalid config: hyperparameters.lora_r: must be between 1 and 256")
        self.assertIn("hyperparameters.lora_r", proc.stderr)  # the log line on stderr

    def test_missing_config_file(self):
        proc, events = run_cli("run", str(self.run_dir / "nope.json"))
        self.assert_one_error(proc, events, "config file ")

    def test_missing_base_model(self):
        proc, events = self.run_config({"method": "dpo", "base_model": "models/absent"})
        message = self.assert_one_error(proc, events, "base_model: ")
        self.assertIn("does not exist", message)
        self.assertIn("never downloads", message)
        # The output directory was set up: train.log holds the same error, metrics.jsonl is empty.
        self.assertIn("does not exist", (self.run_dir / "train.log").read_text(encoding="utf-8"))
        self.assertEqual((self.run_dir / "metrics.jsonl").read_text(encoding="utf-8"), "")

    def test_lfs_pointer_model(self):
        model = self.fake_model()
        (model / "model.safetensors").write_bytes(LFS_POINTER)
        proc, events = self.run_config({"method": "sft", "base_model": str(model)})
        self.assert_one_error(proc, events, "base_model: model.safetensors in ")

    def test_missing_reward_model(self):
        self.fake_model()
        proc, events = self.run_config({"method": "irs", "base_model": "model", "irs": {"reward_model": "rm"}})
        self.assert_one_error(proc, events, "irs.reward_model: ")

    def test_missing_policy_reward_model(self):
        self.fake_model()
        proc, events = self.run_config({"method": "grpo", "base_model": "model", "policy": {"reward_model": "rm"}})
        message = self.assert_one_error(proc, events, "policy.reward_model: ")
        self.assertIn("does not exist", message)

    def test_missing_train_file(self):
        self.fake_model()
        proc, events = self.run_config({"method": "sft", "base_model": "model"})
        message = self.assert_one_error(proc, events, "train_file: ")
        self.assertIn("train.jsonl does not exist", message)

    def test_bad_train_line(self):
        self.fake_model()
        (self.run_dir / "train.jsonl").write_text('{"prompt": "q", "chosen": "a"}\n', encoding="utf-8")
        proc, events = self.run_config({"method": "reward", "base_model": "model"})
        self.assert_one_error(proc, events, f"{self.run_dir.resolve() / 'train.jsonl'}: line 1: rejected: is missing")

    def test_named_eval_file_must_exist(self):
        self.fake_model()
        (self.run_dir / "train.jsonl").write_text('{"prompt": "q", "chosen": "a", "rejected": "b"}\n', encoding="utf-8")
        proc, events = self.run_config({"method": "dpo", "base_model": "model", "eval_file": "held_out.jsonl"})
        self.assert_one_error(proc, events, "eval_file: ")

    def test_valid_inputs_reach_model_loading(self):
        self.fake_model()
        (self.run_dir / "train.jsonl").write_text(
            '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}\n',
            encoding="utf-8")
        proc, events = self.run_config({"method": "sft", "base_model": "model", "device": "cpu"})
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertEqual(events[0], {"event": "progress", "phase": "loading"})
        self.assertEqual(events[-1]["event"], "error")
        if not HAVE_TORCH:
            self.assertEqual(events[-1]["message"],
                             "the local trainer needs torch, transformers and peft, and torch is not installed")

    def test_probe(self):
        proc, events = run_cli("probe")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(len(events), 1)
        probe = events[0]
        self.assertEqual(probe["event"], "probe")
        self.assertEqual(probe["python"], ".".join(map(str, sys.version_info[:3])))
        if HAVE_TORCH:
            self.assertIn(probe["device"], ("cuda", "cpu"))
            self.assertIn("torch", probe)
        else:
            self.assertEqual(probe["device"], "none")
            self.assertIn("torch is not installed", probe["note"])

    def test_usage(self):
        proc, events = run_cli("train")
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(events, [{"event": "error", "message": "usage: run CONFIG_JSON or probe, got train"}])
        self.assertIn("usage: python -m curate_trainer run CONFIG_JSON", proc.stderr)

    def test_library_output_cannot_reach_stdout(self):
        # Whatever is printed after the protocol stream is taken goes to stderr.
        code = ("from curate_trainer.cli import protocol_stream\n"
                "out = protocol_stream()\n"
                "print('library chatter')\n"
                "import os; os.write(1, b'raw chatter\\n')\n"
                "out.write('{\"event\":\"done\"}\\n')\n")
        proc = subprocess.run([sys.executable, "-c", code], cwd=TRAINER_DIR, capture_output=True, text=True,
                              timeout=60)
        self.assertEqual(proc.stdout, '{"event":"done"}\n')
        self.assertIn("library chatter", proc.stderr)
        self.assertIn("raw chatter", proc.stderr)


if __name__ == "__main__":
    unittest.main()

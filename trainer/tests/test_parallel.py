"""A run across two processes trains what one process trains.

On a machine with several GPUs the trainer runs sft, dpo and reward with one
process per GPU (launch.py, parallel.py). The same code runs on a CPU with
torch's gloo backend, so here the real entry point runs DPO on gpu_check's
tiny model twice, once alone and once as two processes started by torch's
launcher (what accelerate's launcher starts on GPUs), and the two adapters
must agree: DPO's loss is a mean over pairs, so two halves of a batch,
each weighted by its share, sum to the whole batch's gradient. Only the
first process prints events.

Needs the trainer's environment; elsewhere it skips naming what is missing,
and under CI=true it fails.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

try:
    import torch
    import transformers  # noqa: F401
    import peft  # noqa: F401
    from safetensors.torch import load_file
    MISSING = None
except ImportError as e:
    MISSING = e.name or str(e)

TRAINER_DIR = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TRAINER_DIR))


def setUpModule():
    if MISSING and os.environ.get("CI") == "true":
        raise RuntimeError(f"{MISSING} is not installed: CI runs this under the trainer's environment")


@unittest.skipIf(MISSING, f"needs torch, transformers and peft; {MISSING} is not installed")
class DataParallelTest(unittest.TestCase):
    def test_two_processes_train_the_adapter_one_does(self):
        import gpu_check

        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            model = gpu_check.build_model(root / "tiny-llama")
            train = [gpu_check.preference_line(s, f) for s, f in gpu_check.TRAIN[:8]]
            cfg = {"method": "dpo", "base_model": str(model), "device": "cpu", "seed": 3, "eval_file": None,
                   "hyperparameters": {"lora_r": 4, "lora_alpha": 8, "lora_dropout": 0.0,
                                       "target_modules": "all-linear", "max_length": 64, "learning_rate": 1e-2,
                                       "batch_size": 4, "epochs": 1, "lr_scheduler": "constant", "beta": 0.5}}
            env = dict(os.environ, PYTHONPATH=str(TRAINER_DIR), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
            for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
                env.pop(name, None)
            runs = {}
            for name, prefix in (("one", [sys.executable]),
                                 ("two", [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                          "--nproc_per_node", "2"])):
                run_dir = root / name
                run_dir.mkdir()
                gpu_check.write_jsonl(run_dir / "train.jsonl", train)
                (run_dir / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
                with open(run_dir / "stderr.txt", "w", encoding="utf-8") as stderr:
                    proc = subprocess.run(prefix + ["-m", "curate_trainer", "run", str(run_dir / "config.json")],
                                          cwd=TRAINER_DIR, env=env, stdout=subprocess.PIPE, stderr=stderr,
                                          text=True, timeout=600)
                tail = (run_dir / "stderr.txt").read_text(encoding="utf-8")[-3000:]
                self.assertEqual(proc.returncode, 0, f"{name}: exit {proc.returncode}; stderr:\n{tail}")
                events = [json.loads(line) for line in proc.stdout.splitlines()]
                runs[name] = events
                self.assertEqual(events[-1], {"event": "done"}, name)
            # One process's events: each step reported once, not once per process.
            steps = [e["step"] for e in runs["two"] if e["event"] == "metric"]
            self.assertEqual(steps, [e["step"] for e in runs["one"] if e["event"] == "metric"])
            self.assertEqual(steps, [1, 2])
            self.assertEqual(len([e for e in runs["two"] if e["event"] == "done"]), 1)
            # The gradient of the first step (same weights in both runs) is the whole batch's:
            # the processes' shares were summed, each weighted by its size.
            norm = {name: [e["grad_norm"] for e in events if e["event"] == "metric"] for name, events in runs.items()}
            self.assertAlmostEqual(norm["two"][0], norm["one"][0], delta=1e-4 * norm["one"][0])
            one = load_file(str(root / "one" / "final" / "adapter_model.safetensors"))
            two = load_file(str(root / "two" / "final" / "adapter_model.safetensors"))
            self.assertEqual(sorted(one), sorted(two))
            # peft starts every lora_B at 0: trained, they are not.
            moved = max(one[k].abs().max().item() for k in one if "lora_B" in k)
            self.assertGreater(moved, 1e-3, "the adapter did not train")
            # Two Adam steps of 1e-2 each: the adapters agree to a few hundredths of a step
            # (the halves are padded to their own lengths, so their sums differ in the last bits,
            # which Adam's first steps scale up where a gradient is near 0).
            for key in one:
                self.assertTrue(torch.allclose(one[key], two[key], atol=5e-4),
                                f"{key}: differs by {(one[key] - two[key]).abs().max().item():.3g}")

if __name__ == "__main__":
    unittest.main()

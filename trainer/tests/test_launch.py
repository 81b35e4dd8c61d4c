"""The command that starts the trainer: itself on one GPU or a CPU, and
accelerate's launcher with one process per GPU where there are several."""

import io
import json
import os
import stat
import tempfile
import threading
import time
import unittest
from pathlib import Path
from unittest import mock

from curate_trainer import launch


class CommandTest(unittest.TestCase):
    def test_one_process_without_several_gpus(self):
        for gpus in (0, 1):
            self.assertEqual(launch.command("/env/bin/python", "/runs/7/config.json", gpus, "sft"),
                             ["/env/bin/python", "-m", "curate_trainer", "run", "/runs/7/config.json"])

    def test_one_process_per_gpu_through_accelerate(self):
        self.assertEqual(launch.command("/env/bin/python", "/runs/7/config.json", 4, "dpo"), [
            "/env/bin/python", "-m", "accelerate.commands.launch", "--multi_gpu", "--num_machines", "1",
            "--num_processes", "4", "--mixed_precision", "no", "--dynamo_backend", "no",
            "-m", "curate_trainer", "run", "/runs/7/config.json"])

    def test_methods_that_run_in_one_process_stay_in_one(self):
        for method in ("grpo", "ppo", "irs"):
            self.assertEqual(launch.command("python", "c.json", 8, method)[1:3], ["-m", "curate_trainer"])
            self.assertEqual(launch.gpus_to_use(method, "cuda", 8), 1)
        for method in launch.DATA_PARALLEL:
            self.assertEqual(launch.gpus_to_use(method, "cuda", 8), 8)
            self.assertEqual(launch.gpus_to_use(method, "auto", 2), 2)
            self.assertEqual(launch.gpus_to_use(method, "cpu", 8), 0)
            self.assertEqual(launch.gpus_to_use(method, "auto", 0), 0)

    def test_world(self):
        with mock.patch.dict(os.environ, {"RANK": "3", "WORLD_SIZE": "4"}):
            self.assertEqual(launch.world(), (3, 4))
            self.assertTrue(launch.launched())
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertEqual(launch.world(), (0, 1))
            self.assertFalse(launch.launched())


class FakeStop:
    def __init__(self):
        self.requested = False


class RelaunchTest(unittest.TestCase):
    """relaunch() with a stand-in for the interpreter: a script that prints
    what accelerate's launcher would pass on from rank 0."""

    def fake_python(self, body):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        d = Path(tmp.name)
        path = d / "python"
        path.write_text("#!/bin/sh\n" + 'echo "$@" > "$(dirname "$0")/argv"\n' + body, encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return path

    def test_events_are_passed_on_with_the_exit_code(self):
        py = self.fake_python("""echo '{"event":"progress","phase":"loading"}'\necho '{"event":"done"}'\nexit 0\n""")
        out = io.StringIO()
        code = launch.relaunch("/runs/1/config.json", 2, "sft", out, FakeStop(), python=py, poll=0.01)
        self.assertEqual(code, 0)
        self.assertEqual([json.loads(x) for x in out.getvalue().splitlines()],
                         [{"event": "progress", "phase": "loading"}, {"event": "done"}])
        self.assertEqual((py.parent / "argv").read_text().split(),
                         launch.command(py, "/runs/1/config.json", 2, "sft")[1:])

    def test_a_launch_that_dies_says_so(self):
        py = self.fake_python("""echo '{"event":"progress","phase":"loading"}'\nexit 3\n""")
        out = io.StringIO()
        code = launch.relaunch("c.json", 2, "dpo", out, FakeStop(), python=py, poll=0.01)
        self.assertEqual(code, 3)
        last = json.loads(out.getvalue().splitlines()[-1])
        self.assertEqual(last["event"], "error")
        self.assertIn("across 2 GPUs ended with exit code 3", last["message"])

    def test_a_stop_is_passed_on(self):
        py = self.fake_python("""trap 'echo "{\\"event\\":\\"error\\",\\"message\\":\\"cancelled\\"}"; exit 143' TERM
echo '{"event":"progress","phase":"training"}'
while true; do sleep 0.05; done
""")
        out = io.StringIO()
        stop = FakeStop()
        threading.Timer(0.5, lambda: setattr(stop, "requested", True)).start()
        started = time.monotonic()
        code = launch.relaunch("c.json", 2, "reward", out, stop, python=py, poll=0.01)
        self.assertLess(time.monotonic() - started, 30)
        self.assertEqual(code, 143)
        self.assertEqual(json.loads(out.getvalue().splitlines()[-1]), {"event": "error", "message": "cancelled"})


if __name__ == "__main__":
    unittest.main()

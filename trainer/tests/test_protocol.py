"""The stdout event encoding and the metrics.jsonl record."""

import datetime
import io
import json
import math
import os
import signal
import sys
import tempfile
import unittest
from pathlib import Path

from curate_trainer import protocol
from curate_trainer.errors import Cancelled
from curate_trainer.stop import StopFlag


_gpu_mem_used = protocol.gpu_mem_used


def setUpModule():
    # The events below are compared whole: no GPU reading in them, whatever
    # this machine has (test_metrics_on_cuda_carry_the_gpu_memory_held
    # puts the reading back).
    protocol.gpu_mem_used = lambda: None


def tearDownModule():
    protocol.gpu_mem_used = _gpu_mem_used


class EncodeTest(unittest.TestCase):
    def test_compact_one_line(self):
        line = protocol.encode_event({"event": "metric", "step": 3, "epoch": 1, "loss": 0.5, "lr": 0.0002})
        self.assertEqual(line, '{"event":"metric","step":3,"epoch":1,"loss":0.5,"lr":0.0002}')

    def test_none_is_left_out_and_non_finite_is_null(self):
        line = protocol.encode_event({"event": "metric", "step": 1, "iter": None, "loss": math.nan,
                                      "weights": {"rel": math.inf, "faith": 1.0}})
        self.assertEqual(line, '{"event":"metric","step":1,"loss":null,"weights":{"rel":null,"faith":1.0}}')

    def test_text_stays_on_one_line(self):
        line = protocol.encode_event({"event": "error", "message": "bad\nthing “quoted”"})
        self.assertNotIn("\n", line)
        self.assertEqual(json.loads(line)["message"], "bad\nthing “quoted”")

    def test_timestamp(self):
        when = datetime.datetime(2026, 2, 3, 12, 0, 1, 250999, tzinfo=datetime.timezone.utc)
        self.assertEqual(protocol.utc_timestamp(when), "2026-02-03T12:00:01.250Z")


class EmitterTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.metrics = Path(self.tmp.name) / "metrics.jsonl"
        self.out = io.StringIO()
        self.emitter = protocol.Emitter(self.out, self.metrics, clock=lambda: "2026-02-03T12:00:00.000Z")

    def tearDown(self):
        self.tmp.cleanup()

    def events(self):
        return [json.loads(line) for line in self.out.getvalue().splitlines()]

    def records(self):
        return [json.loads(line) for line in self.metrics.read_text(encoding="utf-8").splitlines()]

    def test_each_kind_of_event(self):
        e = self.emitter
        e.progress("training", step=2, total_steps=10, epoch=1)
        e.metric({"step": 2, "epoch": 1, "loss": 1.25, "lr": 1e-4, "reward_margin": 0.3})
        e.artifact("final", "adapter")
        e.done()
        e.error("cancelled")
        self.assertEqual(self.events(), [
            {"event": "progress", "phase": "training", "step": 2, "total_steps": 10, "epoch": 1},
            {"event": "metric", "step": 2, "epoch": 1, "loss": 1.25, "lr": 1e-4, "reward_margin": 0.3},
            {"event": "artifact", "path": "final", "kind": "adapter"},
            {"event": "done"},
            {"event": "error", "message": "cancelled"},
        ])

    def test_metrics_are_recorded_with_time_and_phase(self):
        self.emitter.metric({"step": 4, "epoch": 1, "loss": 1.25, "lr": 2e-5})
        self.emitter.metric({"step": 4, "epoch": 1, "eval_loss": 1.5}, phase="evaluating")
        self.emitter.progress("training", step=5)  # progress alone is not recorded
        self.emitter.phase_start("generating", total_steps=8, iter=1, progress=10.0)
        self.emitter.metric({"step": 0, "iter": 1, "avg_reward": 2.1,
                             "weights": {"rel": 1.0, "faith": 1.0, "conc": 0.5}}, phase="metrics")
        ts = "2026-02-03T12:00:00.000Z"
        self.assertEqual(self.records(), [
            {"ts": ts, "phase": "TRAINING", "step": 4, "epoch": 1, "loss": 1.25, "lr": 2e-5},
            {"ts": ts, "phase": "EVALUATING", "step": 4, "epoch": 1, "eval_loss": 1.5},
            {"ts": ts, "iter": 1, "phase": "GENERATING", "progress": 10.0},
            {"ts": ts, "phase": "METRICS", "step": 0, "iter": 1, "avg_reward": 2.1,
             "weights": {"rel": 1.0, "faith": 1.0, "conc": 0.5}},
        ])
        # The phase start is also a progress event on stdout.
        self.assertIn({"event": "progress", "phase": "generating", "step": 0, "total_steps": 8, "iter": 1},
                      self.events())

    def test_stop_event_is_recorded(self):
        self.emitter.stop("KL divergence from the reference reached 0.7", step=12, epoch=1)
        self.assertEqual(self.events(), [{"event": "stop", "step": 12, "epoch": 1,
                                          "reason": "KL divergence from the reference reached 0.7"}])
        self.assertEqual(self.records(), [{"ts": "2026-02-03T12:00:00.000Z", "phase": "STOPPED", "step": 12, "epoch": 1,
                                           "reason": "KL divergence from the reference reached 0.7"}])

    def test_no_metrics_file_before_the_output_directory_is_known(self):
        emitter = protocol.Emitter(self.out)
        emitter.metric({"step": 1, "loss": 1.0})
        self.assertFalse(self.metrics.exists())
        self.assertEqual(self.events(), [{"event": "metric", "step": 1, "loss": 1.0}])

    def test_metrics_on_cuda_carry_the_gpu_memory_held(self):
        class FakeCUDA:
            @staticmethod
            def is_available():
                return True

            @staticmethod
            def is_initialized():
                return True

            @staticmethod
            def memory_reserved():
                return 6800000000

        class FakeTorch:
            cuda = FakeCUDA

        saved = sys.modules.get("torch")
        sys.modules["torch"], protocol.gpu_mem_used = FakeTorch, _gpu_mem_used
        try:
            self.emitter.metric({"step": 1, "loss": 1.0})
        finally:
            protocol.gpu_mem_used = lambda: None
            if saved is None:
                del sys.modules["torch"]
            else:
                sys.modules["torch"] = saved
        self.assertEqual(self.events(), [{"event": "metric", "step": 1, "loss": 1.0, "gpu_mem_used": 6800000000}])
        self.assertEqual(self.records()[0]["gpu_mem_used"], 6800000000)

    def test_unknown_names_are_refused(self):
        with self.assertRaises(ValueError):
            self.emitter.progress("sleeping")
        with self.assertRaises(ValueError):
            self.emitter.artifact("final", "zip")


class StopFlagTest(unittest.TestCase):
    def test_sigterm_sets_the_flag(self):
        old_term = signal.getsignal(signal.SIGTERM)
        old_int = signal.getsignal(signal.SIGINT)
        try:
            stop = StopFlag().install()
            stop.check()  # nothing asked yet
            os.kill(os.getpid(), signal.SIGTERM)
            self.assertTrue(stop.requested)
            with self.assertRaises(Cancelled):
                stop.check()
        finally:
            signal.signal(signal.SIGTERM, old_term)
            signal.signal(signal.SIGINT, old_int)


if __name__ == "__main__":
    unittest.main()

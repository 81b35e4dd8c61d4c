"""The trainer's stdout protocol and its metrics.jsonl record.

Every event is one JSON object on one line of stdout, flushed at once, so the
job that runs the trainer can follow it line by line. Every metric is also
appended to ``metrics.jsonl`` in the output directory with a ``ts`` field, so
the curves survive the process.
"""

import datetime
import json
import math
import os
import sys
from pathlib import Path

PHASES = ("loading", "training", "evaluating", "generating", "scoring", "saving")
ARTIFACT_KINDS = ("adapter", "reward_model", "checkpoint")


def utc_timestamp(now=None):
    """RFC 3339 UTC time with milliseconds, e.g. 2026-02-03T12:00:01.250Z."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _clean(value):
    """Make a value JSON-safe: NaN and infinities become null (JSON has no
    spelling for them), tuples become lists, nested dicts are cleaned too."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    # numpy and torch scalars have .item(); anything else is shown as text.
    item = getattr(value, "item", None)
    if callable(item):
        return _clean(item())
    return str(value)


def gpu_mem_used():
    """Bytes of GPU memory this process holds (torch's reserved memory, as
    seed 003's train status reports it), or None off CUDA: without torch
    loaded, or before the run has touched the GPU."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return int(torch.cuda.memory_reserved())


def encode_event(event):
    """One compact JSON line (no newline) for an event dict; None fields are left out."""
    body = {k: _clean(v) for k, v in event.items() if v is not None}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class Emitter:
    """Writes protocol events to a text stream and metrics to metrics.jsonl.

    stream: where events go (the process's real stdout in production).
    metrics_path: set once the output directory is known; None until then.
    clock: returns the timestamp string for metrics.jsonl (tests pin it).
    """

    def __init__(self, stream, metrics_path=None, clock=utc_timestamp):
        self._stream = stream
        self.metrics_path = Path(metrics_path) if metrics_path else None
        self._clock = clock

    @property
    def stream(self):
        return self._stream

    def mute(self):
        """Send nothing more: the processes other than the first of a run
        across several GPUs stay silent."""
        self._stream = open(os.devnull, "w", encoding="utf-8")
        self.metrics_path = None

    def _emit(self, event):
        self._stream.write(encode_event(event) + "\n")
        self._stream.flush()

    def _record(self, entry):
        if self.metrics_path is None:
            return
        line = encode_event({"ts": self._clock(), **entry})
        with open(self.metrics_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def progress(self, phase, step=None, total_steps=None, epoch=None, iter=None):
        """A progress event on stdout only (sent often; not recorded)."""
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}")
        self._emit({"event": "progress", "phase": phase, "step": step,
                    "total_steps": total_steps, "epoch": epoch, "iter": iter})

    def phase_start(self, phase, total_steps=None, epoch=None, iter=None, progress=None):
        """A progress event for the start of a phase, also recorded in
        metrics.jsonl in the seed's style ({"iter", "phase": "GENERATING", "progress"})."""
        self.progress(phase, step=0, total_steps=total_steps, epoch=epoch, iter=iter)
        self._record({"iter": iter, "phase": phase.upper(), "progress": progress})

    def metric(self, values, phase="training"):
        """A metric event; `values` holds step, epoch, iter, loss, lr and any
        other measurements. The metrics.jsonl copy also names the phase. On
        CUDA each also carries gpu_mem_used, the GPU memory held then."""
        if phase not in PHASES and phase != "metrics":
            raise ValueError(f"unknown phase {phase!r}")
        if "gpu_mem_used" not in values:
            used = gpu_mem_used()
            if used is not None:
                values = {**values, "gpu_mem_used": used}
        self._emit({"event": "metric", **values})
        self._record({"phase": phase.upper(), **values})

    def stop(self, reason, step=None, epoch=None, iter=None):
        """The run ends early on purpose (early stopping, the KL bound, reward
        hacking) and says why; it still saves its model and reports done.
        Recorded in metrics.jsonl with phase STOPPED."""
        self._emit({"event": "stop", "step": step, "epoch": epoch, "iter": iter, "reason": str(reason)})
        self._record({"phase": "STOPPED", "step": step, "epoch": epoch, "iter": iter, "reason": str(reason)})

    def artifact(self, path, kind):
        if kind not in ARTIFACT_KINDS:
            raise ValueError(f"unknown artifact kind {kind!r}")
        self._emit({"event": "artifact", "path": str(path), "kind": kind})

    def done(self):
        self._emit({"event": "done"})

    def error(self, message):
        self._emit({"event": "error", "message": str(message)})

    def probe(self, info):
        self._emit({"event": "probe", **info})

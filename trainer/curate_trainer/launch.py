"""How the trainer is started: one process, or one per GPU through
accelerate's launcher when the machine has several.

The local worker always runs ``python -m curate_trainer run CONFIG``; on a
machine with two or more GPUs that process starts the same command under
``accelerate launch`` (one process per GPU), passes its events on, and
exits with its exit code. Only the first process (rank 0) prints events and
saves models; the gradients of the others are averaged into every step.

This module needs the standard library alone.
"""

import json
import os
import subprocess
import sys
import threading
import time

# The methods whose optimisation loop (training.py) runs data-parallel.
DATA_PARALLEL = ("sft", "dpo", "reward")


def entry(config_path):
    return ["-m", "curate_trainer", "run", str(config_path)]


def command(python, config_path, gpus, method=None):
    """The argv that runs the trainer on config_path with `gpus` GPUs: the
    entry point alone for fewer than two (or a method that runs in one
    process), else accelerate's launcher with one process per GPU."""
    if gpus < 2 or (method is not None and method not in DATA_PARALLEL):
        return [str(python)] + entry(config_path)
    return [str(python), "-m", "accelerate.commands.launch", "--multi_gpu", "--num_machines", "1",
            "--num_processes", str(gpus), "--mixed_precision", "no", "--dynamo_backend", "no"] + entry(config_path)


def world():
    """(rank, number of processes) of this process: (0, 1) unless launched across GPUs."""
    try:
        return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 0, 1


def launched():
    """True in a process that accelerate's launcher started."""
    return world()[1] > 1


def gpus_to_use(method, device, cuda_count):
    """How many GPUs a run of `method` uses: every one the machine has for
    the data-parallel methods on CUDA, one for the others, none on a CPU."""
    if device == "cpu" or cuda_count < 1:
        return 0
    if method in DATA_PARALLEL:
        return cuda_count
    return 1


def relaunch(config_path, gpus, method, stream, stop, python=None, poll=0.2):
    """Run the trainer across `gpus` GPUs under accelerate's launcher, copy
    its events (rank 0's) to `stream`, and return its exit code. A stop
    request (SIGTERM) is passed on to the launcher once, which passes it to
    every process, so each saves its checkpoint as a single process would.
    When the launch ends without a last word of its own, an error event
    says how it ended."""
    argv = command(python or sys.executable, config_path, gpus, method)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, encoding="utf-8", start_new_session=True)
    last = {}

    def copy():
        for line in proc.stdout:
            stream.write(line if line.endswith("\n") else line + "\n")
            stream.flush()
            try:
                last.update(event=json.loads(line).get("event"))
            except (ValueError, AttributeError):
                pass

    reader = threading.Thread(target=copy, daemon=True)
    reader.start()
    signalled = False
    while proc.poll() is None:
        if stop.requested and not signalled:
            proc.terminate()
            signalled = True
        time.sleep(poll)
    reader.join()
    proc.stdout.close()
    code = proc.returncode
    if code < 0:  # ended by a signal: as a shell reports it
        code = 128 - code
    if last.get("event") not in ("done", "error"):
        stream.write(json.dumps({"event": "error", "message": f"the run across {gpus} GPUs ended with exit code "
                                 f"{code} before its last event"}) + "\n")
        stream.flush()
        code = code or 1
    return code

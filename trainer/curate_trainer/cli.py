"""Command line: ``run CONFIG_JSON`` trains, ``probe`` reports the machine.

stdout carries only protocol events. The process's file descriptor 1 is
pointed at stderr before anything else runs, and events go to a private copy
of the original stdout, so text printed by a library (or by CUDA) cannot
break the one-JSON-object-per-line stream.
"""

import importlib
import importlib.metadata
import logging
import os
import platform
import sys
from pathlib import Path

from . import config, data, launch, paths
from .errors import Cancelled, TrainerError
from .protocol import Emitter
from .stop import CANCELLED_EXIT_CODE, StopFlag

log = logging.getLogger("curate_trainer")

USAGE = "usage: python -m curate_trainer run CONFIG_JSON\n       python -m curate_trainer probe"

PARSERS = {
    "sft": data.parse_chat,
    "dpo": data.parse_preference,
    "reward": data.parse_preference,
    "irs": data.parse_prompt,
    "grpo": data.parse_prompt,
    "ppo": data.parse_prompt,
}


def protocol_stream():
    """A private line-buffered copy of stdout; fd 1 then writes to stderr."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    return os.fdopen(fd, "w", encoding="utf-8", buffering=1)


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_to(handler):
    """Send log records (ours, the libraries', and Python warnings) to handler."""
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root.addHandler(handler)
    logging.captureWarnings(True)


def prepare(cfg_path, emitter):
    """Everything that needs no torch: the config, the output directory, the
    paths and the data. Problems here are reported before a model loads."""
    cfg = config.load(cfg_path)
    out = Path(cfg.output_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TrainerError(f"output_dir: cannot create {out}: {e.strerror}") from None
    log_to(logging.FileHandler(out / "train.log", encoding="utf-8"))
    metrics = out / "metrics.jsonl"
    if launch.world()[0] == 0:  # the other processes of a run across GPUs record nothing
        metrics.write_text("", encoding="utf-8")
        emitter.metrics_path = metrics
    log.info("method %s, base model %s, output %s", cfg.method, cfg.base_model, out)
    paths.check_model_dir(cfg.base_model, "base_model")
    if cfg.method == "irs" and cfg.irs.reward_model:
        paths.check_model_dir(cfg.irs.reward_model, "irs.reward_model")
    if cfg.method in ("grpo", "ppo") and cfg.policy.reward_model:
        paths.check_model_dir(cfg.policy.reward_model, "policy.reward_model")
    parse = PARSERS[cfg.method]
    train = data.read_examples(cfg.train_file, parse, "train_file")
    evaluation = data.read_examples(cfg.eval_file, parse, "eval_file", required=False) if cfg.eval_file else []
    log.info("%d training and %d evaluation examples", len(train), len(evaluation))
    return cfg, train, evaluation


def run(cfg_path, emitter, stop):
    """Train as config.json says; returns the exit code."""
    log_to(logging.StreamHandler(sys.stderr))
    try:
        cfg, train, evaluation = prepare(cfg_path, emitter)
        stop.check()
        emitter.progress("loading")
        from . import runtime  # the first import of torch; TrainerError when it is missing

        device = runtime.choose_device(cfg.device, cfg.require_gpu)
        gpus = launch.gpus_to_use(cfg.method, device, runtime.cuda_count())
        if gpus > 1 and not launch.launched():
            log.info("%d GPUs: running %s across them with accelerate", gpus, cfg.method)
            return launch.relaunch(cfg_path, gpus, cfg.method, emitter.stream, stop)
        if launch.launched():
            device = runtime.join_processes(device)
            if launch.world()[0] != 0:
                emitter.mute()
        dtype = runtime.choose_dtype(cfg.hyperparameters.dtype, device)
        runtime.seed_everything(cfg.seed)
        runtime.route_library_logs()
        log.info("device %s, dtype %s", device, dtype)
        context = runtime.Run(cfg=cfg, emitter=emitter, stop=stop, device=device, dtype=dtype)
        method = importlib.import_module(f".{cfg.method}", __package__)
        method.train(context, train, evaluation)
        emitter.done()
        return 0
    except Cancelled:
        log.info("cancelled")
        emitter.error("cancelled")
        return CANCELLED_EXIT_CODE
    except TrainerError as e:
        log.error("%s", e)
        emitter.error(str(e))
        return 1
    except Exception as e:  # noqa: BLE001 - the job must always get an error event
        log.exception("run failed")
        first_line = (str(e).strip().splitlines() or [""])[0]
        if type(e).__name__ == "OutOfMemoryError":
            emitter.error("out of GPU memory: lower hyperparameters.batch_size or max_length "
                          f"(or raise gradient_accumulation_steps) ({first_line})")
        else:
            emitter.error(f"internal error: {type(e).__name__}: {first_line}")
        return 1


def probe(emitter):
    """Report Python, torch, transformers, peft, Unsloth and the GPU; always exits 0."""
    info = {"device": "none", "python": platform.python_version()}
    try:
        import torch
    except ImportError:
        info["note"] = "torch is not installed, so this machine cannot run the local trainer"
        emitter.probe(info)
        return 0
    info["torch"] = torch.__version__
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(device="cuda", gpu_name=props.name, gpu_memory_bytes=props.total_memory,
                    gpu_count=torch.cuda.device_count(), cuda=torch.version.cuda,
                    bf16=torch.cuda.is_bf16_supported())
    else:
        info["device"] = "cpu"
    missing = []
    for name in ("transformers", "peft"):
        try:
            info[name] = importlib.import_module(name).__version__
        except ImportError:
            missing.append(name)
    # Unsloth is looked up, not imported: importing it patches torch and
    # transformers.
    try:
        info["unsloth"] = importlib.metadata.version("unsloth")
    except importlib.metadata.PackageNotFoundError:
        pass
    if missing:
        info["note"] = " and ".join(missing) + " not installed, so runs will fail here"
    emitter.probe(info)
    return 0


def main(argv):
    emitter = Emitter(protocol_stream())
    if argv == ["probe"]:
        return probe(emitter)
    if len(argv) == 2 and argv[0] == "run":
        return run(argv[1], emitter, StopFlag().install())
    if argv in (["-h"], ["--help"]):
        print(USAGE, file=sys.stderr)
        return 0
    print(USAGE, file=sys.stderr)
    emitter.error("usage: run CONFIG_JSON or probe, got " + (" ".join(argv) or "no arguments"))
    return 2

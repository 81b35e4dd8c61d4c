"""What every training method shares once torch is loaded: the run's
context, device and dtype choice, loading models offline, LoRA and saving.
Batching and the losses are in losses.py, which needs torch alone.

This is the first module that imports torch, transformers and peft, and it
is imported only when a run starts.
"""

import logging
import os
import random
from dataclasses import dataclass
from pathlib import Path

from .errors import TrainerError

# Nothing is ever fetched from the Hub: set before transformers is imported.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# In dependency order, so the message names the most basic missing package.
try:
    import torch
    import transformers
    import peft
except ImportError as e:  # pragma: no cover - depends on the machine
    raise TrainerError(
        f"the local trainer needs torch, transformers and peft, and {e.name or e} is not installed") from None

log = logging.getLogger("curate_trainer")


@dataclass
class Run:
    """One run: its configuration, where events go, the stop flag, and the
    device the models live on."""
    cfg: object
    emitter: object
    stop: object
    device: str
    dtype: object

    @property
    def hp(self):
        return self.cfg.hyperparameters

    def artifact_path(self, path):
        """A path as the job reads it: relative to the run directory when inside it."""
        path = Path(path)
        try:
            return str(path.relative_to(self.cfg.run_dir))
        except ValueError:
            return str(path)


def choose_device(requested, require_gpu):
    has_cuda = torch.cuda.is_available()
    if require_gpu and not has_cuda:
        raise TrainerError(
            "no GPU available: require_gpu is true but torch sees no CUDA device "
            f"(torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'})")
    if requested == "cuda" and not has_cuda:
        raise TrainerError('no GPU available: device is "cuda" but torch sees no CUDA device')
    if requested == "auto":
        return "cuda" if has_cuda else "cpu"
    return requested


def choose_dtype(name, device):
    if name == "auto":
        if device.startswith("cuda") and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def cuda_count():
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def join_processes(device):
    """In a run across several GPUs (launch.py), join the others and return
    this process's device: its own GPU (LOCAL_RANK), or the CPU."""
    backend = "nccl" if device.startswith("cuda") else "gloo"
    if device.startswith("cuda"):
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend)
    log.info("process %d of %d on %s", torch.distributed.get_rank(), torch.distributed.get_world_size(), device)
    return device


def is_main():
    """True in the process that reports and saves: the only one, or the first of several."""
    return not (torch.distributed.is_available() and torch.distributed.is_initialized()) \
        or torch.distributed.get_rank() == 0


def seed_everything(seed):
    random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def route_library_logs():
    """Send transformers' own log lines through our handlers (stderr and train.log)."""
    transformers.utils.logging.disable_default_handler()
    transformers.utils.logging.enable_propagation()


def _version(text):
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def _dtype_argument(dtype):
    # transformers 4.56 renamed torch_dtype to dtype; older releases know only the first.
    key = "dtype" if _version(transformers.__version__) >= (4, 56) else "torch_dtype"
    return {key: dtype}


def load_tokenizer(path):
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as e:
        raise TrainerError(f"could not load the tokenizer from {path}: {e}") from None
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise TrainerError(f"the tokenizer in {path} has neither a padding nor an end-of-sequence token")
        # Padding positions are masked out, so reusing EOS for them is safe.
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "right"
    return tokenizer


def load_causal_lm(run, path):
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            str(path), local_files_only=True, **_dtype_argument(run.dtype))
    except (OSError, ValueError) as e:
        raise TrainerError(f"could not load a causal language model from {path}: {e}") from None
    model.config.use_cache = False
    return model.to(run.device)


def load_classifier(run, path, pad_token_id):
    try:
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            str(path), num_labels=1, local_files_only=True, **_dtype_argument(run.dtype))
    except (OSError, ValueError) as e:
        raise TrainerError(f"could not load a sequence classification model from {path}: {e}") from None
    # The score is read at the last token that is not padding, so the model must know the padding id.
    model.config.pad_token_id = pad_token_id
    model.config.use_cache = False
    return model.to(run.device)


def add_lora(run, model, task_type):
    hp = run.hp
    target = hp.target_modules

    def config(modules):
        return peft.LoraConfig(r=hp.lora_r, lora_alpha=hp.lora_alpha, lora_dropout=hp.lora_dropout,
                               target_modules=modules, bias="none", task_type=task_type)

    if target == "auto":
        # peft knows the attention projections of common architectures; for
        # any other it asks for target_modules, and every linear layer is used.
        try:
            return peft.get_peft_model(model, config(None))
        except ValueError as e:
            if "target_modules" not in str(e):
                raise
            log.info("peft has no default target modules for %s; using all linear layers",
                     model.config.model_type)
            target = "all-linear"
    try:
        return peft.get_peft_model(model, config(target))
    except ValueError as e:
        raise TrainerError(f"hyperparameters.target_modules: {e}") from None


def disable_dropout(model):
    """Make forward passes deterministic; DPO compares the policy with the
    reference on the same inputs, and dropout noise would only blur that."""
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0


def trainable_summary(model):
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return f"{trainable:,} of {total:,} parameters trainable ({100 * trainable / max(total, 1):.3f}%)"


def save_model(run, model, tokenizer, relative, kind):
    """save_pretrained the model (an adapter for a PEFT model) and the
    tokenizer under output_dir/relative, and report it as an artifact. In a
    run across several GPUs only the first process saves."""
    path = Path(run.cfg.output_dir) / relative
    if not is_main():
        return path
    run.emitter.progress("saving")
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    log.info("saved %s to %s", kind, path)
    run.emitter.artifact(run.artifact_path(path), kind)
    return path

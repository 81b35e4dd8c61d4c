"""config.json: reading, defaults and validation.

Every problem names its field (``hyperparameters.lora_r``) and all problems are
reported together, so one edit fixes a config. Unknown fields are refused: a
misspelt hyperparameter would otherwise be silently ignored.
"""

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .errors import ConfigError, TrainerError

METHODS = ("sft", "dpo", "reward", "irs", "grpo", "ppo")
DEVICES = ("auto", "cuda", "cpu")
SCHEDULERS = ("linear", "cosine", "constant")
DTYPES = ("auto", "float32", "bfloat16", "float16")
SCORE_TERMS = ("rel", "faith", "conc", "rm")
# The policy methods may also weigh a judge's score (policy.judge_url) and
# the reward Curate scores with the organisation's formula (policy.rlaif).
POLICY_TERMS = SCORE_TERMS + ("judge", "curate")
HEURISTIC_WEIGHTS = {"rel": 1.0, "faith": 1.0, "conc": 0.5}  # the design's reward formula

# Learning rates that suit LoRA for each method when none is given.
DEFAULT_LEARNING_RATE = {"sft": 2e-4, "dpo": 5e-5, "reward": 2e-5, "irs": 2e-5, "grpo": 1e-5, "ppo": 1e-5}

# Other defaults that differ by method. The reward model's are the recipe
# of Curate's reward-model design (seed 001): batch 16, 5 epochs, weight
# decay 0.01, cosine decay after a warmup, early stopping on validation
# loss. The policy methods' batch is prompts per step.
METHOD_DEFAULTS = {
    "reward": {"batch_size": 16, "epochs": 5, "weight_decay": 0.01, "lr_scheduler": "cosine",
               "early_stopping_patience": 2},
    "grpo": {"batch_size": 2},
    "ppo": {"batch_size": 2},
}
# The reward model's warmup: 500 steps, or 10% of the steps when that is fewer.
REWARD_WARMUP_STEPS = 500
REWARD_WARMUP_SHARE = 0.1

MAX_CONFIG_BYTES = 1 << 20


@dataclass(frozen=True)
class Hyperparameters:
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    target_modules: object = "auto"  # "auto", "all-linear" or a list of module names
    learning_rate: float = 2e-4
    epochs: int = 1
    batch_size: int = 4
    gradient_accumulation_steps: int = 1
    max_length: int = 1024
    max_steps: Optional[int] = None
    warmup_steps: Optional[int] = None  # None: the method's default (see warmup_for)
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    lr_scheduler: str = "linear"
    beta: float = 0.1
    mse_weight: float = 1.0
    ranking_weight: float = 1.0
    logging_steps: int = 1
    save_steps: int = 0
    dtype: str = "auto"
    early_stopping_patience: int = 0  # evaluations without improvement before stopping; 0: never
    early_stopping_threshold: float = 0.0  # how far below the best eval_loss counts as improving


@dataclass(frozen=True)
class DWConfig:
    history_window: int = 5
    temperature: float = 2.0
    initial_weights: dict = field(default_factory=lambda: {"rel": 1.0, "faith": 1.0, "conc": 0.5})
    dynamic: bool = True


@dataclass(frozen=True)
class IRSConfig:
    n_iterations: int = 3
    n_candidates: int = 4
    batch_size: int = 2
    learning_rate: float = 2e-5
    max_new_tokens: int = 256
    sft_epochs: int = 1
    sampling_temperature: float = 1.0
    top_p: float = 1.0
    n_questions: Optional[int] = None
    reward_model: Optional[Path] = None
    dw_config: DWConfig = field(default_factory=DWConfig)


@dataclass(frozen=True)
class RLAIFConfig:
    """The reward scored by Curate (curate_reward.py): its URL, how long
    one call may take and how many times a failed call is tried again."""
    url: str
    timeout: float = 120.0
    retries: int = 4


@dataclass(frozen=True)
class PolicyConfig:
    """Settings of the policy-optimisation methods, grpo and ppo."""
    group_size: int = 4
    max_new_tokens: int = 128
    sampling_temperature: float = 1.0
    top_p: float = 1.0
    clip_epsilon: float = 0.2
    kl_coef: float = 0.04
    kl_max: float = 0.5
    updates_per_batch: int = 2
    micro_batch_size: int = 8
    reward_model: Optional[Path] = None
    judge_url: Optional[str] = None
    judge_timeout: float = 120.0
    rlaif: Optional[RLAIFConfig] = None
    weights: dict = field(default_factory=lambda: dict(HEURISTIC_WEIGHTS))
    holdout_weights: dict = field(default_factory=lambda: dict(HEURISTIC_WEIGHTS))
    holdout_every: int = 10
    holdout_patience: int = 2
    holdout_tolerance: float = 0.05
    holdout_prompts: int = 32
    # ppo only
    value_coef: float = 0.1
    value_clip: float = 0.2
    gamma: float = 1.0
    lam: float = 0.95


@dataclass(frozen=True)
class Config:
    method: str
    base_model: Path
    run_dir: Path
    output_dir: Path
    train_file: Path
    eval_file: Optional[Path]
    device: str = "auto"
    require_gpu: bool = False
    seed: int = 42
    job_id: Optional[str] = None
    hyperparameters: Hyperparameters = field(default_factory=Hyperparameters)
    irs: IRSConfig = field(default_factory=IRSConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)


class _Checker:
    """Collects problems while reading typed values out of a JSON object."""

    def __init__(self):
        self.problems = []

    def bad(self, name, message):
        self.problems.append(f"{name}: {message}")

    def obj(self, raw, name, allowed):
        """The object at `name` (empty when absent), refusing unknown keys."""
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            self.bad(name, f"must be a JSON object, got {_kind(raw)}")
            return {}
        for key in raw:
            if key not in allowed:
                self.bad(f"{name}.{key}" if name else key,
                         "unknown field (allowed: " + ", ".join(sorted(allowed)) + ")")
        return raw

    def integer(self, raw, name, default, lo, hi, optional=False):
        value = raw.get(name.rsplit(".", 1)[-1], default)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.bad(name, f"must be an integer between {lo} and {hi}, got {_show(value)}")
            return default
        if not lo <= value <= hi:
            self.bad(name, f"must be between {lo} and {hi}, got {value}")
            return default
        return value

    def number(self, raw, name, default, lo, hi, lo_open=False, hi_open=False):
        value = raw.get(name.rsplit(".", 1)[-1], default)
        rng = ("(" if lo_open else "[") + f"{lo:g}, {hi:g}" + (")" if hi_open else "]")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            self.bad(name, f"must be a number in {rng}, got {_show(value)}")
            return default
        too_low = value <= lo if lo_open else value < lo
        too_high = value >= hi if hi_open else value > hi
        if too_low or too_high:
            self.bad(name, f"must be in {rng}, got {value}")
            return default
        return float(value)

    def choice(self, raw, name, default, choices):
        value = raw.get(name.rsplit(".", 1)[-1], default)
        if value not in choices or not isinstance(value, str):
            self.bad(name, "must be one of " + ", ".join(f'"{c}"' for c in choices) + f", got {_show(value)}")
            return default
        return value

    def boolean(self, raw, name, default):
        value = raw.get(name.rsplit(".", 1)[-1], default)
        if not isinstance(value, bool):
            self.bad(name, f"must be true or false, got {_show(value)}")
            return default
        return value

    def string(self, raw, name, default=None, required=False):
        key = name.rsplit(".", 1)[-1]
        value = raw.get(key, default)
        if value is None:
            if required:
                self.bad(name, "is required")
            return None
        if not isinstance(value, str) or not value.strip():
            self.bad(name, f"must be a non-empty string, got {_show(value)}")
            return None
        if "\x00" in value:
            self.bad(name, "must not contain NUL characters")
            return None
        return value


def _kind(value):
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _show(value):
    text = json.dumps(value, ensure_ascii=False) if _jsonable(value) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _jsonable(value):
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


TOP_LEVEL = {"method", "base_model", "output_dir", "train_file", "eval_file", "device",
             "require_gpu", "seed", "job_id", "hyperparameters", "irs", "policy"}
HYPERPARAMETERS = set(Hyperparameters.__dataclass_fields__)
IRS_FIELDS = set(IRSConfig.__dataclass_fields__)
DW_FIELDS = set(DWConfig.__dataclass_fields__)
POLICY_FIELDS = set(PolicyConfig.__dataclass_fields__)
RLAIF_FIELDS = set(RLAIFConfig.__dataclass_fields__)


def _resolve(run_dir, text):
    path = Path(text).expanduser()
    return path if path.is_absolute() else run_dir / path


def _target_modules(c, hp):
    value = hp.get("target_modules", "auto")
    name = "hyperparameters.target_modules"
    if value in ("auto", "all-linear"):
        return value
    if (isinstance(value, list) and 0 < len(value) <= 64
            and all(isinstance(m, str) and m.strip() and len(m) <= 200 for m in value)):
        return list(value)
    c.bad(name, f'must be "auto", "all-linear" or a list of 1 to 64 module names, got {_show(value)}')
    return "auto"


def _hyperparameters(c, raw, method):
    hp = c.obj(raw.get("hyperparameters"), "hyperparameters", HYPERPARAMETERS)
    p = "hyperparameters."
    d = METHOD_DEFAULTS.get(method, {})
    values = dict(
        lora_r=c.integer(hp, p + "lora_r", 8, 1, 256),
        lora_alpha=c.integer(hp, p + "lora_alpha", 16, 1, 1024),
        lora_dropout=c.number(hp, p + "lora_dropout", 0.05, 0.0, 1.0, hi_open=True),
        target_modules=_target_modules(c, hp),
        learning_rate=c.number(hp, p + "learning_rate", DEFAULT_LEARNING_RATE[method], 0.0, 1.0,
                               lo_open=True, hi_open=True),
        epochs=c.integer(hp, p + "epochs", d.get("epochs", 1), 1, 100),
        batch_size=c.integer(hp, p + "batch_size", d.get("batch_size", 4), 1, 1024),
        gradient_accumulation_steps=c.integer(hp, p + "gradient_accumulation_steps", 1, 1, 1024),
        max_length=c.integer(hp, p + "max_length", 1024, 16, 32768),
        max_steps=c.integer(hp, p + "max_steps", None, 1, 10_000_000, optional=True),
        warmup_steps=c.integer(hp, p + "warmup_steps", None, 0, 1_000_000, optional=True),
        weight_decay=c.number(hp, p + "weight_decay", d.get("weight_decay", 0.0), 0.0, 1.0),
        max_grad_norm=c.number(hp, p + "max_grad_norm", 1.0, 0.0, 1000.0),
        lr_scheduler=c.choice(hp, p + "lr_scheduler", d.get("lr_scheduler", "linear"), SCHEDULERS),
        beta=c.number(hp, p + "beta", 0.1, 0.0, 10.0, lo_open=True),
        mse_weight=c.number(hp, p + "mse_weight", 1.0, 0.0, 100.0),
        ranking_weight=c.number(hp, p + "ranking_weight", 1.0, 0.0, 100.0),
        logging_steps=c.integer(hp, p + "logging_steps", 1, 1, 1_000_000),
        save_steps=c.integer(hp, p + "save_steps", 0, 0, 10_000_000),
        dtype=c.choice(hp, p + "dtype", "auto", DTYPES),
        early_stopping_patience=c.integer(hp, p + "early_stopping_patience", d.get("early_stopping_patience", 0),
                                          0, 1000),
        early_stopping_threshold=c.number(hp, p + "early_stopping_threshold", 0.0, 0.0, 1e6),
    )
    if values["mse_weight"] == 0 and values["ranking_weight"] == 0:
        c.bad(p + "ranking_weight", "mse_weight and ranking_weight must not both be 0")
    return Hyperparameters(**values)


def _initial_weights(c, dw, has_reward_model):
    name = "irs.dw_config.initial_weights"
    raw = dw.get("initial_weights")
    if raw is None:
        weights = dict(DWConfig().initial_weights)
    else:
        checked = c.obj(raw, name, set(SCORE_TERMS))
        weights = {}
        for key in SCORE_TERMS:
            if key in checked:
                # Signed weights are allowed: a negative weight turns a score into a penalty.
                value = c.number(checked, f"{name}.{key}", 0.0, -100.0, 100.0)
                weights[key] = value
        if isinstance(raw, dict) and not raw:
            c.bad(name, "must name at least one of " + ", ".join(SCORE_TERMS))
    if "rm" in weights and not has_reward_model:
        c.bad(f"{name}.rm", "needs irs.reward_model (the reward model that gives this score)")
    if has_reward_model and "rm" not in weights:
        weights["rm"] = 1.0
    return weights


def _irs(c, raw, run_dir):
    irs = c.obj(raw.get("irs"), "irs", IRS_FIELDS)
    p = "irs."
    reward_model = c.string(irs, p + "reward_model")
    dw = c.obj(irs.get("dw_config"), p + "dw_config", DW_FIELDS)
    q = p + "dw_config."
    dw_config = DWConfig(
        history_window=c.integer(dw, q + "history_window", 5, 2, 1000),
        temperature=c.number(dw, q + "temperature", 2.0, 0.0, 1000.0, lo_open=True),
        initial_weights=_initial_weights(c, dw, reward_model is not None),
        dynamic=c.boolean(dw, q + "dynamic", True),
    )
    return IRSConfig(
        n_iterations=c.integer(irs, p + "n_iterations", 3, 1, 50),
        n_candidates=c.integer(irs, p + "n_candidates", 4, 2, 16),
        batch_size=c.integer(irs, p + "batch_size", 2, 1, 1024),
        learning_rate=c.number(irs, p + "learning_rate", 2e-5, 0.0, 1.0, lo_open=True, hi_open=True),
        max_new_tokens=c.integer(irs, p + "max_new_tokens", 256, 1, 8192),
        sft_epochs=c.integer(irs, p + "sft_epochs", 1, 1, 100),
        sampling_temperature=c.number(irs, p + "sampling_temperature", 1.0, 0.0, 10.0, lo_open=True),
        top_p=c.number(irs, p + "top_p", 1.0, 0.0, 1.0, lo_open=True),
        n_questions=c.integer(irs, p + "n_questions", None, 1, 1_000_000, optional=True),
        reward_model=_resolve(run_dir, reward_model) if reward_model else None,
        dw_config=dw_config,
    )


def _policy_weights(c, raw, name, allowed, default):
    """A dict of score weights from `raw` (absent: `default`); each key one
    of `allowed`, each value in [-100, 100], at least one of them."""
    if raw is None:
        return dict(default)
    checked = c.obj(raw, name, set(POLICY_TERMS))
    if isinstance(raw, dict) and not raw:
        c.bad(name, "must name at least one of " + ", ".join(POLICY_TERMS))
    weights = {}
    for key in POLICY_TERMS:
        if key in checked:
            weights[key] = c.number(checked, f"{name}.{key}", 0.0, -100.0, 100.0)
            if key not in allowed:
                need = {"rm": "policy.reward_model", "judge": "policy.judge_url", "curate": "policy.rlaif"}[key]
                c.bad(f"{name}.{key}", f"needs {need} (what gives this score)")
    return weights


def _rlaif(c, raw):
    """policy.rlaif: absent or null for none."""
    if raw is None:
        return None
    r = c.obj(raw, "policy.rlaif", RLAIF_FIELDS)
    if not isinstance(raw, dict):
        return None
    p = "policy.rlaif."
    url = c.string(r, p + "url", required=True)
    if url is not None and not url.startswith(("http://", "https://")):
        c.bad(p + "url", f"must be an http:// or https:// URL, got {_show(url)}")
    return RLAIFConfig(url=url or "",
                       timeout=c.number(r, p + "timeout", 120.0, 0.0, 3600.0, lo_open=True),
                       retries=c.integer(r, p + "retries", 4, 0, 20))


def _policy(c, raw, run_dir, method):
    pc = c.obj(raw.get("policy"), "policy", POLICY_FIELDS)
    p = "policy."
    reward_model = c.string(pc, p + "reward_model")
    judge_url = c.string(pc, p + "judge_url")
    if judge_url is not None and not judge_url.startswith(("http://", "https://")):
        c.bad(p + "judge_url", f"must be an http:// or https:// URL, got {_show(judge_url)}")
    rlaif = _rlaif(c, pc.get("rlaif"))
    allowed = set(SCORE_TERMS) - ({"rm"} if reward_model is None else set())
    if judge_url is not None:
        allowed.add("judge")
    if rlaif is not None:
        allowed.add("curate")
    # With RLAIF the reward is Curate's; with a reward model or a judge,
    # theirs; without, the design's formula of heuristic scores.
    if rlaif is not None:
        default = {"curate": 1.0}
    else:
        default = {k: 1.0 for k in (("rm",) if reward_model else ()) + (("judge",) if judge_url else ())}
    weights = _policy_weights(c, pc.get("weights"), p + "weights", allowed, default or HEURISTIC_WEIGHTS)
    # The held-out check should not trust the score being optimised: by
    # default it leaves the reward model out, and Curate's reward (whose
    # samples are kept as the run's and may go to the experts).
    check = {k: w for k, w in weights.items() if k not in ("rm", "curate")} or dict(HEURISTIC_WEIGHTS)
    holdout_weights = _policy_weights(c, pc.get("holdout_weights"), p + "holdout_weights", allowed, check)
    smallest_group = 2 if method == "grpo" else 1
    return PolicyConfig(
        group_size=c.integer(pc, p + "group_size", 4, smallest_group, 64),
        max_new_tokens=c.integer(pc, p + "max_new_tokens", 128, 1, 8192),
        sampling_temperature=c.number(pc, p + "sampling_temperature", 1.0, 0.0, 10.0, lo_open=True),
        top_p=c.number(pc, p + "top_p", 1.0, 0.0, 1.0, lo_open=True),
        clip_epsilon=c.number(pc, p + "clip_epsilon", 0.2, 0.0, 1.0, lo_open=True, hi_open=True),
        kl_coef=c.number(pc, p + "kl_coef", 0.04, 0.0, 10.0),
        kl_max=c.number(pc, p + "kl_max", 0.5, 0.0, 100.0, lo_open=True),
        updates_per_batch=c.integer(pc, p + "updates_per_batch", 2, 1, 16),
        micro_batch_size=c.integer(pc, p + "micro_batch_size", 8, 1, 1024),
        reward_model=_resolve(run_dir, reward_model) if reward_model else None,
        judge_url=judge_url,
        judge_timeout=c.number(pc, p + "judge_timeout", 120.0, 0.0, 3600.0, lo_open=True),
        rlaif=rlaif,
        weights=weights,
        holdout_weights=holdout_weights,
        holdout_every=c.integer(pc, p + "holdout_every", 10, 1, 1_000_000),
        holdout_patience=c.integer(pc, p + "holdout_patience", 2, 1, 1000),
        holdout_tolerance=c.number(pc, p + "holdout_tolerance", 0.05, 0.0, 1e6),
        holdout_prompts=c.integer(pc, p + "holdout_prompts", 32, 1, 10_000),
        value_coef=c.number(pc, p + "value_coef", 0.1, 0.0, 100.0),
        value_clip=c.number(pc, p + "value_clip", 0.2, 0.0, 1e6, lo_open=True),
        gamma=c.number(pc, p + "gamma", 1.0, 0.0, 1.0),
        lam=c.number(pc, p + "lam", 0.95, 0.0, 1.0),
    )


def validate(raw, run_dir):
    """Check a parsed config.json and return a Config; raise ConfigError
    listing every problem. run_dir is the directory holding config.json:
    relative paths are taken from there."""
    run_dir = Path(run_dir)
    c = _Checker()
    if not isinstance(raw, dict):
        raise ConfigError([f"config: must be a JSON object, got {_kind(raw)}"])
    c.obj(raw, "", TOP_LEVEL)
    method = c.choice(raw, "method", None, METHODS) if "method" in raw else None
    if "method" not in raw:
        c.bad("method", "is required (one of " + ", ".join(f'"{m}"' for m in METHODS) + ")")
    base_model = c.string(raw, "base_model", required=True)
    output_dir = c.string(raw, "output_dir")
    train_file = c.string(raw, "train_file", "train.jsonl")
    # eval_file: null turns evaluation off.
    eval_file = c.string(raw, "eval_file", "eval.jsonl") if raw.get("eval_file", "") is not None else None
    device = c.choice(raw, "device", "auto", DEVICES)
    require_gpu = c.boolean(raw, "require_gpu", False)
    seed = c.integer(raw, "seed", 42, 0, 2**32 - 1)
    job_id = c.string(raw, "job_id")
    if require_gpu and device == "cpu":
        c.bad("require_gpu", 'is true but device is "cpu"')
    hp = _hyperparameters(c, raw, method or "sft")
    irs = _irs(c, raw, run_dir)
    policy = _policy(c, raw, run_dir, method or "grpo")
    if c.problems:
        raise ConfigError(c.problems)

    eval_path = _resolve(run_dir, eval_file) if eval_file else None
    # The default eval file is optional; one named explicitly must exist (checked when read).
    if eval_path is not None and "eval_file" not in raw and not eval_path.exists():
        eval_path = None
    return Config(
        method=method,
        base_model=_resolve(run_dir, base_model),
        run_dir=run_dir,
        output_dir=_resolve(run_dir, output_dir) if output_dir else run_dir,
        train_file=_resolve(run_dir, train_file),
        eval_file=eval_path,
        device=device,
        require_gpu=require_gpu,
        seed=seed,
        job_id=job_id,
        hyperparameters=hp,
        irs=irs,
        policy=policy,
    )


def load(path):
    """Read and validate config.json at `path`."""
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise TrainerError(f"config file {path} does not exist") from None
    except OSError as e:
        raise TrainerError(f"config file {path}: {e.strerror}") from None
    if size > MAX_CONFIG_BYTES:
        raise TrainerError(f"config file {path} is {size} bytes; the limit is {MAX_CONFIG_BYTES}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise TrainerError(f"config file {path} is not valid UTF-8") from None
    except json.JSONDecodeError as e:
        raise TrainerError(f"config file {path} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    return validate(raw, path.parent.resolve())

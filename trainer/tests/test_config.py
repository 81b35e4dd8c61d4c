"""config.json validation: defaults, and a clear message naming the field for
every kind of bad value."""

import copy
import json
import tempfile
import unittest
from pathlib import Path

from curate_trainer import config
from curate_trainer.errors import ConfigError, TrainerError

RUN_DIR = Path("/runs/job1")
VALID = {"method": "sft", "base_model": "/models/tiny"}


def with_change(path, value):
    """VALID with the dotted `path` set to value (or removed when value is ...)."""
    raw = copy.deepcopy(VALID)
    keys = path.split(".")
    target = raw
    for key in keys[:-1]:
        target = target.setdefault(key, {})
    if value is ...:
        target.pop(keys[-1], None)
    else:
        target[keys[-1]] = value
    return raw


class DefaultsTest(unittest.TestCase):
    def test_minimal_config(self):
        cfg = config.validate(VALID, RUN_DIR)
        self.assertEqual(cfg.method, "sft")
        self.assertEqual(cfg.base_model, Path("/models/tiny"))
        self.assertEqual(cfg.output_dir, RUN_DIR)
        self.assertEqual(cfg.train_file, RUN_DIR / "train.jsonl")
        self.assertIsNone(cfg.eval_file)  # the default eval.jsonl does not exist
        self.assertEqual(cfg.device, "auto")
        self.assertFalse(cfg.require_gpu)
        hp = cfg.hyperparameters
        self.assertEqual((hp.lora_r, hp.lora_alpha, hp.lora_dropout, hp.target_modules), (8, 16, 0.05, "auto"))
        self.assertEqual((hp.epochs, hp.batch_size, hp.max_length, hp.beta), (1, 4, 1024, 0.1))
        self.assertEqual(hp.learning_rate, 2e-4)
        self.assertIsNone(hp.max_steps)
        irs = cfg.irs
        self.assertEqual((irs.n_iterations, irs.n_candidates, irs.batch_size), (3, 4, 2))
        self.assertEqual((irs.learning_rate, irs.max_new_tokens), (2e-5, 256))
        self.assertEqual((irs.dw_config.history_window, irs.dw_config.temperature), (5, 2.0))
        self.assertEqual(irs.dw_config.initial_weights, {"rel": 1.0, "faith": 1.0, "conc": 0.5})

    def test_method_sets_default_learning_rate(self):
        self.assertEqual(config.validate({**VALID, "method": "dpo"}, RUN_DIR).hyperparameters.learning_rate, 5e-5)
        self.assertEqual(config.validate({**VALID, "method": "reward"}, RUN_DIR).hyperparameters.learning_rate, 2e-5)
        self.assertEqual(config.validate({**VALID, "method": "grpo"}, RUN_DIR).hyperparameters.learning_rate, 1e-5)

    def test_reward_model_recipe(self):
        # Seed 001's recipe: lr 2e-5, batch 16, 5 epochs, weight decay 0.01, cosine,
        # early stopping; the warmup (500 or 10%) is settled once the step count is known.
        hp = config.validate({**VALID, "method": "reward"}, RUN_DIR).hyperparameters
        self.assertEqual((hp.learning_rate, hp.batch_size, hp.epochs, hp.weight_decay, hp.lr_scheduler),
                         (2e-5, 16, 5, 0.01, "cosine"))
        self.assertEqual((hp.early_stopping_patience, hp.early_stopping_threshold), (2, 0.0))
        self.assertIsNone(hp.warmup_steps)
        # Given values win over the recipe; other methods keep the general defaults.
        raw = {**VALID, "method": "reward", "hyperparameters": {"epochs": 2, "warmup_steps": 0, "early_stopping_patience": 0}}
        hp = config.validate(raw, RUN_DIR).hyperparameters
        self.assertEqual((hp.epochs, hp.warmup_steps, hp.early_stopping_patience), (2, 0, 0))
        hp = config.validate({**VALID, "method": "dpo"}, RUN_DIR).hyperparameters
        self.assertEqual((hp.batch_size, hp.epochs, hp.weight_decay, hp.lr_scheduler, hp.early_stopping_patience),
                         (4, 1, 0.0, "linear", 0))

    def test_policy_defaults(self):
        cfg = config.validate({**VALID, "method": "grpo"}, RUN_DIR)
        pc = cfg.policy
        self.assertEqual(cfg.hyperparameters.batch_size, 2)  # prompts per step
        self.assertEqual((pc.group_size, pc.max_new_tokens, pc.clip_epsilon, pc.kl_coef, pc.kl_max),
                         (4, 128, 0.2, 0.04, 0.5))
        self.assertEqual((pc.updates_per_batch, pc.micro_batch_size, pc.holdout_every), (2, 8, 10))
        # Without a reward model or a judge the reward is the design's formula,
        # and the held-out check uses it too.
        self.assertEqual(pc.weights, {"rel": 1.0, "faith": 1.0, "conc": 0.5})
        self.assertEqual(pc.holdout_weights, {"rel": 1.0, "faith": 1.0, "conc": 0.5})

    def test_policy_reward_model_and_judge(self):
        cfg = config.validate({**VALID, "method": "grpo", "policy": {"reward_model": "rm/final"}}, RUN_DIR)
        self.assertEqual(cfg.policy.reward_model, RUN_DIR / "rm/final")
        self.assertEqual(cfg.policy.weights, {"rm": 1.0})
        # The held-out check leaves out the score being optimised.
        self.assertEqual(cfg.policy.holdout_weights, {"rel": 1.0, "faith": 1.0, "conc": 0.5})
        cfg = config.validate({**VALID, "method": "ppo", "policy": {
            "reward_model": "rm", "judge_url": "http://127.0.0.1:9/score", "group_size": 1}}, RUN_DIR)
        self.assertEqual(cfg.policy.weights, {"rm": 1.0, "judge": 1.0})
        self.assertEqual(cfg.policy.holdout_weights, {"judge": 1.0})
        self.assertEqual(cfg.policy.group_size, 1)
        raw = {**VALID, "method": "grpo", "policy": {"weights": {"rel": 1, "conc": -0.5},
                                                     "holdout_weights": {"faith": 2}}}
        cfg = config.validate(raw, RUN_DIR)
        self.assertEqual((cfg.policy.weights, cfg.policy.holdout_weights), ({"rel": 1.0, "conc": -0.5}, {"faith": 2.0}))

    def test_relative_paths_are_taken_from_the_run_directory(self):
        raw = {**VALID, "base_model": "models/m", "output_dir": "out", "train_file": "data/t.jsonl",
               "eval_file": "data/e.jsonl"}
        cfg = config.validate(raw, RUN_DIR)
        self.assertEqual(cfg.base_model, RUN_DIR / "models/m")
        self.assertEqual(cfg.output_dir, RUN_DIR / "out")
        self.assertEqual(cfg.train_file, RUN_DIR / "data/t.jsonl")
        # Named explicitly, the eval file is kept even before it exists: reading it then fails clearly.
        self.assertEqual(cfg.eval_file, RUN_DIR / "data/e.jsonl")

    def test_default_eval_file_is_used_when_present(self):
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = Path(tmp)
            (run_dir / "eval.jsonl").write_text("", encoding="utf-8")
            self.assertEqual(config.validate(VALID, run_dir).eval_file, run_dir / "eval.jsonl")

    def test_eval_file_null_means_no_evaluation(self):
        self.assertIsNone(config.validate({**VALID, "eval_file": None}, RUN_DIR).eval_file)

    def test_reward_model_brings_its_weight(self):
        cfg = config.validate(with_change("irs.reward_model", "rm/final"), RUN_DIR)
        self.assertEqual(cfg.irs.reward_model, RUN_DIR / "rm/final")
        self.assertEqual(cfg.irs.dw_config.initial_weights, {"rel": 1.0, "faith": 1.0, "conc": 0.5, "rm": 1.0})

    def test_signed_initial_weights(self):
        raw = with_change("irs.dw_config.initial_weights", {"rel": 0.35, "conc": -0.15})
        self.assertEqual(config.validate(raw, RUN_DIR).irs.dw_config.initial_weights, {"rel": 0.35, "conc": -0.15})

    def test_target_modules_list(self):
        raw = with_change("hyperparameters.target_modules", ["q_proj", "v_proj"])
        self.assertEqual(config.validate(raw, RUN_DIR).hyperparameters.target_modules, ["q_proj", "v_proj"])


BAD = [
    ("method", ..., 'method: is required (one of "sft", "dpo", "reward", "irs", "grpo", "ppo")'),
    ("method", "rlhf", 'method: must be one of "sft", "dpo", "reward", "irs", "grpo", "ppo", got "rlhf"'),
    ("base_model", ..., "base_model: is required"),
    ("base_model", "", 'base_model: must be a non-empty string, got ""'),
    ("base_model", 7, "base_model: must be a non-empty string, got 7"),
    ("device", "tpu", 'device: must be one of "auto", "cuda", "cpu", got "tpu"'),
    ("require_gpu", "yes", 'require_gpu: must be true or false, got "yes"'),
    ("seed", -1, "seed: must be between 0 and 4294967295, got -1"),
    ("seed", 1.5, "seed: must be an integer between 0 and 4294967295, got 1.5"),
    ("train_file", "", 'train_file: must be a non-empty string, got ""'),
    ("output_dir", ["x"], 'output_dir: must be a non-empty string, got ["x"]'),
    ("colour", "red", "colour: unknown field"),
    ("hyperparameters", [], "hyperparameters: must be a JSON object, got a list"),
    ("hyperparameters.lora_r", 0, "hyperparameters.lora_r: must be between 1 and 256, got 0"),
    ("hyperparameters.lora_r", 257, "hyperparameters.lora_r: must be between 1 and 256, got 257"),
    ("hyperparameters.lora_r", True, "hyperparameters.lora_r: must be an integer between 1 and 256, got true"),
    ("hyperparameters.lora_r", "8", 'hyperparameters.lora_r: must be an integer between 1 and 256, got "8"'),
    ("hyperparameters.lora_alpha", 0, "hyperparameters.lora_alpha: must be between 1 and 1024, got 0"),
    ("hyperparameters.lora_dropout", 1.0, "hyperparameters.lora_dropout: must be in [0, 1), got 1.0"),
    ("hyperparameters.target_modules", [], "hyperparameters.target_modules: must be \"auto\", \"all-linear\" or a list"),
    ("hyperparameters.target_modules", "q_proj", "hyperparameters.target_modules: must be \"auto\""),
    ("hyperparameters.learning_rate", 0, "hyperparameters.learning_rate: must be in (0, 1), got 0"),
    ("hyperparameters.learning_rate", 1, "hyperparameters.learning_rate: must be in (0, 1), got 1"),
    ("hyperparameters.learning_rate", "fast", 'hyperparameters.learning_rate: must be a number in (0, 1), got "fast"'),
    ("hyperparameters.epochs", 0, "hyperparameters.epochs: must be between 1 and 100, got 0"),
    ("hyperparameters.epochs", 101, "hyperparameters.epochs: must be between 1 and 100, got 101"),
    ("hyperparameters.batch_size", 0, "hyperparameters.batch_size: must be between 1 and 1024, got 0"),
    ("hyperparameters.batch_size", 1025, "hyperparameters.batch_size: must be between 1 and 1024, got 1025"),
    ("hyperparameters.max_length", 15, "hyperparameters.max_length: must be between 16 and 32768, got 15"),
    ("hyperparameters.max_length", 32769, "hyperparameters.max_length: must be between 16 and 32768, got 32769"),
    ("hyperparameters.beta", 0, "hyperparameters.beta: must be in (0, 10], got 0"),
    ("hyperparameters.beta", 10.5, "hyperparameters.beta: must be in (0, 10], got 10.5"),
    ("hyperparameters.max_steps", 0, "hyperparameters.max_steps: must be between 1 and 10000000, got 0"),
    ("hyperparameters.gradient_accumulation_steps", 0,
     "hyperparameters.gradient_accumulation_steps: must be between 1 and 1024, got 0"),
    ("hyperparameters.warmup_steps", -1, "hyperparameters.warmup_steps: must be between 0 and 1000000, got -1"),
    ("hyperparameters.weight_decay", 2, "hyperparameters.weight_decay: must be in [0, 1], got 2"),
    ("hyperparameters.max_grad_norm", -1, "hyperparameters.max_grad_norm: must be in [0, 1000], got -1"),
    ("hyperparameters.lr_scheduler", "step", 'hyperparameters.lr_scheduler: must be one of "linear", "cosine", "constant"'),
    ("hyperparameters.mse_weight", -0.5, "hyperparameters.mse_weight: must be in [0, 100], got -0.5"),
    ("hyperparameters.ranking_weight", 101, "hyperparameters.ranking_weight: must be in [0, 100], got 101"),
    ("hyperparameters.save_steps", -2, "hyperparameters.save_steps: must be between 0 and 10000000, got -2"),
    ("hyperparameters.logging_steps", 0, "hyperparameters.logging_steps: must be between 1 and 1000000, got 0"),
    ("hyperparameters.dtype", "int8", 'hyperparameters.dtype: must be one of "auto", "float32", "bfloat16", "float16"'),
    ("hyperparameters.learning_rte", 0.1, "hyperparameters.learning_rte: unknown field"),
    ("hyperparameters.early_stopping_patience", -1,
     "hyperparameters.early_stopping_patience: must be between 0 and 1000, got -1"),
    ("hyperparameters.early_stopping_threshold", -0.1,
     "hyperparameters.early_stopping_threshold: must be in [0, 1e+06], got -0.1"),
    ("policy", 3, "policy: must be a JSON object, got a number"),
    ("policy.group_size", 0, "policy.group_size: must be between 1 and 64, got 0"),
    ("policy.group_size", 65, "policy.group_size: must be between 1 and 64, got 65"),
    ("policy.max_new_tokens", 0, "policy.max_new_tokens: must be between 1 and 8192, got 0"),
    ("policy.clip_epsilon", 0, "policy.clip_epsilon: must be in (0, 1), got 0"),
    ("policy.kl_coef", -1, "policy.kl_coef: must be in [0, 10], got -1"),
    ("policy.kl_max", 0, "policy.kl_max: must be in (0, 100], got 0"),
    ("policy.updates_per_batch", 0, "policy.updates_per_batch: must be between 1 and 16, got 0"),
    ("policy.judge_url", "ftp://judge", 'policy.judge_url: must be an http:// or https:// URL, got "ftp://judge"'),
    ("policy.weights", {}, "policy.weights: must name at least one of rel, faith, conc, rm, judge"),
    ("policy.weights", {"rm": 1.0}, "policy.weights.rm: needs policy.reward_model"),
    ("policy.weights", {"judge": 1.0}, "policy.weights.judge: needs policy.judge_url"),
    ("policy.holdout_weights", {"speed": 1.0}, "policy.holdout_weights.speed: unknown field"),
    ("policy.holdout_every", 0, "policy.holdout_every: must be between 1 and 1000000, got 0"),
    ("policy.gamma", 1.5, "policy.gamma: must be in [0, 1], got 1.5"),
    ("policy.entropy", 0.1, "policy.entropy: unknown field"),
    ("irs", "on", "irs: must be a JSON object, got a string"),
    ("irs.n_iterations", 0, "irs.n_iterations: must be between 1 and 50, got 0"),
    ("irs.n_iterations", 51, "irs.n_iterations: must be between 1 and 50, got 51"),
    ("irs.n_candidates", 1, "irs.n_candidates: must be between 2 and 16, got 1"),
    ("irs.n_candidates", 17, "irs.n_candidates: must be between 2 and 16, got 17"),
    ("irs.batch_size", 0, "irs.batch_size: must be between 1 and 1024, got 0"),
    ("irs.learning_rate", 1.5, "irs.learning_rate: must be in (0, 1), got 1.5"),
    ("irs.max_new_tokens", 0, "irs.max_new_tokens: must be between 1 and 8192, got 0"),
    ("irs.sft_epochs", 0, "irs.sft_epochs: must be between 1 and 100, got 0"),
    ("irs.sampling_temperature", 0, "irs.sampling_temperature: must be in (0, 10], got 0"),
    ("irs.top_p", 1.5, "irs.top_p: must be in (0, 1], got 1.5"),
    ("irs.n_questions", 0, "irs.n_questions: must be between 1 and 1000000, got 0"),
    ("irs.reward_model", "", 'irs.reward_model: must be a non-empty string, got ""'),
    ("irs.load_in_4bit", True, "irs.load_in_4bit: unknown field"),
    ("irs.dw_config.history_window", 1, "irs.dw_config.history_window: must be between 2 and 1000, got 1"),
    ("irs.dw_config.temperature", 0, "irs.dw_config.temperature: must be in (0, 1000], got 0"),
    ("irs.dw_config.dynamic", 1, "irs.dw_config.dynamic: must be true or false, got 1"),
    ("irs.dw_config.initial_weights", {}, "irs.dw_config.initial_weights: must name at least one of rel, faith, conc, rm"),
    ("irs.dw_config.initial_weights", {"speed": 1.0}, "irs.dw_config.initial_weights.speed: unknown field"),
    ("irs.dw_config.initial_weights", {"rel": "high"},
     'irs.dw_config.initial_weights.rel: must be a number in [-100, 100], got "high"'),
    ("irs.dw_config.initial_weights", {"rm": 1.0}, "irs.dw_config.initial_weights.rm: needs irs.reward_model"),
]


class BadFieldTest(unittest.TestCase):
    def test_every_bad_field_is_named(self):
        for path, value, message in BAD:
            with self.subTest(field=path, value=value):
                with self.assertRaises(ConfigError) as ctx:
                    config.validate(with_change(path, value), RUN_DIR)
                problems = ctx.exception.problems
                self.assertEqual(len(problems), 1, problems)
                self.assertTrue(problems[0].startswith(message), f"{problems[0]!r} does not start with {message!r}")
                self.assertIn(message, str(ctx.exception))

    def test_all_problems_are_reported_together(self):
        raw = {"method": "sft", "base_model": "/m", "hyperparameters": {"lora_r": 0, "epochs": 0},
               "irs": {"n_candidates": 1}}
        with self.assertRaises(ConfigError) as ctx:
            config.validate(raw, RUN_DIR)
        fields = [p.split(":")[0] for p in ctx.exception.problems]
        self.assertEqual(fields, ["hyperparameters.lora_r", "hyperparameters.epochs", "irs.n_candidates"])

    def test_require_gpu_contradicts_cpu(self):
        with self.assertRaises(ConfigError) as ctx:
            config.validate({**VALID, "require_gpu": True, "device": "cpu"}, RUN_DIR)
        self.assertEqual(ctx.exception.problems, ['require_gpu: is true but device is "cpu"'])

    def test_zero_loss_weights(self):
        raw = {**VALID, "method": "reward", "hyperparameters": {"mse_weight": 0, "ranking_weight": 0}}
        with self.assertRaises(ConfigError) as ctx:
            config.validate(raw, RUN_DIR)
        self.assertIn("mse_weight and ranking_weight must not both be 0", str(ctx.exception))

    def test_grpo_needs_a_group(self):
        # Advantages are normalised within a group, so GRPO needs two replies per prompt.
        with self.assertRaises(ConfigError) as ctx:
            config.validate({**VALID, "method": "grpo", "policy": {"group_size": 1}}, RUN_DIR)
        self.assertEqual(ctx.exception.problems, ["policy.group_size: must be between 2 and 64, got 1"])

    def test_not_an_object(self):
        with self.assertRaises(ConfigError) as ctx:
            config.validate([1, 2], RUN_DIR)
        self.assertEqual(ctx.exception.problems, ["config: must be a JSON object, got a list"])


class LoadTest(unittest.TestCase):
    def test_load_reads_from_the_run_directory(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "config.json"
            path.write_text(json.dumps({**VALID, "base_model": "m"}), encoding="utf-8")
            cfg = config.load(path)
            self.assertEqual(cfg.base_model, Path(tmp).resolve() / "m")
            self.assertEqual(cfg.run_dir, Path(tmp).resolve())

    def test_load_errors(self):
        with tempfile.TemporaryDirectory() as tmp:
            missing = Path(tmp) / "none.json"
            with self.assertRaisesRegex(TrainerError, "config file .*none.json does not exist"):
                config.load(missing)
            broken = Path(tmp) / "broken.json"
            broken.write_text('{"method": "sft",\n  oops}', encoding="utf-8")
            with self.assertRaisesRegex(TrainerError, "is not valid JSON: .* at line 2 column 3"):
                config.load(broken)
            binary = Path(tmp) / "binary.json"
            binary.write_bytes(b'{"method": "\xff"}')
            with self.assertRaisesRegex(TrainerError, "is not valid UTF-8"):
                config.load(binary)


if __name__ == "__main__":
    unittest.main()

"""Iterative Rejection Sampling: generate, score, keep the best, fine-tune, repeat.

Each iteration samples n_candidates replies per prompt from the current
policy (the base model with its LoRA adapter), scores them with the
heuristic rewards (and a trained reward model when irs.reward_model is set),
combines the scores with the current DW-GRPO weights, writes the best reply
per prompt to samples.jsonl, moves the weights by the DW-GRPO rule, runs one
SFT pass on the best replies and saves checkpoints/iter_N.

The weights follow the average score of all candidates of an iteration, a
measure of what the policy produces rather than of what was selected.
"""

import json
import logging
import random
from pathlib import Path

import torch

from . import losses, runtime, scoring
from .chat import ChatFormat
from .data import ChatExample, Message
from .errors import Cancelled
from .reward import scores as reward_scores
from .sft import encode as encode_chat
from .sft import make_loop
from .training import LoopSettings

log = logging.getLogger("curate_trainer")

# What share of the way through the run each phase of an iteration starts at.
PHASE_SHARE = {"generating": 0.0, "scoring": 1 / 3, "training": 2 / 3}


class RewardModel:
    """A trained reward model (the final/ of a reward run) giving sigmoid(score) in [0, 1]."""

    def __init__(self, run, path):
        self.run = run
        self.tokenizer = runtime.load_tokenizer(path)
        self.fmt = ChatFormat(self.tokenizer)
        self.model = runtime.load_classifier(run, path, self.tokenizer.pad_token_id)
        self.model.eval()
        self.max_length = run.hp.max_length

    def score(self, prompt, replies):
        sequences = [self.fmt.encode_pair(prompt, (Message("assistant", r),), self.max_length)[0]
                     for r in replies]
        with torch.no_grad():
            raw = reward_scores(self.model, self.run, sequences, self.tokenizer.pad_token_id)
        return torch.sigmoid(raw).tolist()


def choose_prompts(examples, n_questions, seed):
    """The prompts used in every iteration: all of them, or a seeded sample of n_questions."""
    if n_questions is None or n_questions >= len(examples):
        return list(examples)
    return random.Random(seed).sample(list(examples), n_questions)


def generate(run, model, tokenizer, fmt, prompts, iter_no):
    """n_candidates sampled replies for each prompt, in prompt order."""
    irs = run.cfg.irs
    prompt_room = max(16, run.hp.max_length - irs.max_new_tokens)
    kwargs = dict(do_sample=True, temperature=irs.sampling_temperature, top_p=irs.top_p,
                  max_new_tokens=irs.max_new_tokens, num_return_sequences=irs.n_candidates,
                  pad_token_id=tokenizer.pad_token_id, use_cache=True)
    if getattr(model.generation_config, "eos_token_id", None) is None:
        kwargs["eos_token_id"] = tokenizer.eos_token_id
    model.eval()
    out = []
    for start in range(0, len(prompts), irs.batch_size):
        run.stop.check()
        batch = prompts[start:start + irs.batch_size]
        # Left padding keeps every prompt's last token next to the generated ones.
        ids = [fmt.encode_prompt(p.prompt, prompt_room) for p in batch]
        input_ids = losses.pad(ids, tokenizer.pad_token_id, side="left").to(run.device)
        attention_mask = losses.pad([[1] * len(x) for x in ids], 0, side="left").to(run.device)
        with torch.no_grad():
            generated = model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        texts = tokenizer.batch_decode(generated[:, input_ids.shape[1]:], skip_special_tokens=True)
        for j in range(len(batch)):
            out.append([t.strip() for t in texts[j * irs.n_candidates:(j + 1) * irs.n_candidates]])
        run.emitter.progress("generating", step=min(start + len(batch), len(prompts)),
                             total_steps=len(prompts), iter=iter_no)
    return out


def score_all(run, prompts, candidates, weights, reward_model, iter_no):
    """Per prompt: the score dicts and combined rewards of its candidates."""
    budget = run.cfg.irs.max_new_tokens
    scored = []
    for i, (p, replies) in enumerate(zip(prompts, candidates)):
        run.stop.check()
        per_reply = [scoring.heuristic_scores(p.query, r, p.context, budget) for r in replies]
        if reward_model is not None:
            for s, rm in zip(per_reply, reward_model.score(p.prompt, replies)):
                s["rm"] = rm
        rewards = [scoring.combine(s, weights) for s in per_reply]
        scored.append((per_reply, rewards))
        run.emitter.progress("scoring", step=i + 1, total_steps=len(prompts), iter=iter_no)
    return scored


def train(run, train_examples, eval_examples):
    cfg, irs = run.cfg, run.cfg.irs
    out_dir = Path(cfg.output_dir)
    samples_path = out_dir / "samples.jsonl"
    samples_path.write_text("", encoding="utf-8")
    run.emitter.progress("loading")
    tokenizer = runtime.load_tokenizer(cfg.base_model)
    fmt = ChatFormat(tokenizer)
    model = runtime.add_lora(run, runtime.load_causal_lm(run, cfg.base_model), "CAUSAL_LM")
    log.info("LoRA: %s", runtime.trainable_summary(model))
    reward_model = RewardModel(run, irs.reward_model) if irs.reward_model else None
    if eval_examples:
        log.info("eval_file is not used by irs; the rewards measure each iteration")
    prompts = choose_prompts(train_examples, irs.n_questions, cfg.seed)
    dw = irs.dw_config
    weights = scoring.DynamicWeights(dw.initial_weights, dw.history_window, dw.temperature, dw.dynamic)
    settings = LoopSettings(learning_rate=irs.learning_rate, epochs=irs.sft_epochs, batch_size=irs.batch_size,
                            max_grad_norm=run.hp.max_grad_norm, scheduler="constant")
    step = 0

    def checkpoint(name):
        runtime.save_model(run, model, tokenizer, f"checkpoints/{name}", "checkpoint")

    def start(phase, iter_no, total_steps=None):
        done = (iter_no - 1 + PHASE_SHARE[phase]) / irs.n_iterations
        run.emitter.phase_start(phase, total_steps=total_steps, iter=iter_no, progress=round(100 * done, 1))

    iter_no = 1
    try:
        for iter_no in range(1, irs.n_iterations + 1):
            start("generating", iter_no, len(prompts))
            candidates = generate(run, model, tokenizer, fmt, prompts, iter_no)
            start("scoring", iter_no, len(prompts))
            used = dict(weights.weights)
            scored = score_all(run, prompts, candidates, used, reward_model, iter_no)
            best = []
            all_scores, all_rewards = [], []
            with open(samples_path, "a", encoding="utf-8") as f:
                for index, (p, replies, (per_reply, rewards)) in enumerate(zip(prompts, candidates, scored)):
                    all_scores += per_reply
                    all_rewards += rewards
                    k = scoring.best_candidate(replies, rewards)
                    if k is None:
                        continue
                    best.append((p, replies[k], rewards[k]))
                    f.write(json.dumps({
                        "iter": iter_no, "index": index, "line": p.line,
                        "prompt": [m.as_dict() for m in p.prompt], "context": p.context,
                        "response": replies[k], "reward": rewards[k], "scores": per_reply[k],
                        "candidate": k, "n_candidates": len(replies),
                    }, ensure_ascii=False) + "\n")
            breakdown = scoring.mean_scores(all_scores, used)
            new_weights = weights.record(breakdown)
            run.emitter.metric({
                "step": step, "iter": iter_no,
                "avg_reward": sum(all_rewards) / max(len(all_rewards), 1),
                "best_avg_reward": sum(r for _, _, r in best) / len(best) if best else None,
                "n_samples": len(best),
                "reward_breakdown": breakdown, "weights": used, "next_weights": new_weights,
            }, phase="metrics")
            start("training", iter_no)
            examples = [ChatExample(messages=tuple(p.prompt) + (Message("assistant", reply),), line=p.line)
                        for p, reply, _ in best]
            items = encode_chat(fmt, examples, run.hp.max_length, "samples")
            if items:
                loop = make_loop(run, model, tokenizer, items, [], settings, cfg.seed + iter_no,
                                 iter=iter_no, step_offset=step)
                try:
                    loop.run_epochs()
                finally:
                    step = loop.global_step
            else:
                log.warning("iteration %d: no usable best sample; skipping its fine-tuning", iter_no)
            checkpoint(f"iter_{iter_no}")
    except Cancelled:
        checkpoint(f"iter_{iter_no}")
        raise
    runtime.save_model(run, model, tokenizer, "final", "adapter")

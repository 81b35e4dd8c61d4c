"""Policy optimisation with LoRA against a reward: methods grpo and ppo.

Each step takes hyperparameters.batch_size prompts, samples
policy.group_size replies to each from the current policy (the base model
with its adapter), scores them, and updates the adapter (rl.py): GRPO with
group-normalised advantages, the clipped objective and a KL penalty against
the reference policy; PPO with a value head on the adapter's last hidden
states, GAE and the clipped value loss. The reference is the same weights
with the adapter switched off, so only one copy of the model is loaded.

The reward is policy.weights over the scores (scoring.py): the design's
formula of heuristic scores (rel, faith, conc), a trained reward model's
sigmoid(score) (rm, policy.reward_model), a judge's score over HTTP
(judge, policy.judge_url, see judge.py), and the reward Curate scores with
the organisation's formula (curate, policy.rlaif, see curate_reward.py),
whose components join the step's reward_breakdown.

Two guards end a run early, with the reason as a stop event (guards.py):

- the KL bound: when the sampling policy's mean per-token KL from the
  reference passes policy.kl_max, the previous step's adapter is kept;
- reward hacking: every policy.holdout_every steps (and before the first),
  greedy replies to held-out prompts (eval_file, or a seeded tenth of the
  training prompts) are scored with policy.holdout_weights; when the
  training reward has risen while that score fell more than
  holdout_tolerance below its best, holdout_patience checks in a row, the
  adapter of the best check is kept.
"""

import logging
import math
import random

import torch

from . import losses, rl, runtime, scoring
from .chat import IGNORE, ChatFormat
from .errors import Cancelled, TrainerError
from .guards import KLBound, RewardHacking
from .curate_reward import CurateReward
from .irs import RewardModel
from .judge import Judge
from .training import restore, snapshot

log = logging.getLogger("curate_trainer")

# Without an eval_file, this share of the training prompts is held out.
HOLDOUT_SHARE = 0.1


class Scorer:
    """Rewards of replies: weights over the heuristic scores, the reward
    model's and the judge's."""

    def __init__(self, run, pc):
        self.run = run
        self.budget = pc.max_new_tokens
        self.reward_model = RewardModel(run, pc.reward_model) if pc.reward_model else None
        self.judge = Judge(pc.judge_url, pc.judge_timeout) if pc.judge_url else None
        self.curate = (CurateReward(pc.rlaif.url, timeout=pc.rlaif.timeout, retries=pc.rlaif.retries)
                       if pc.rlaif else None)

    def rewards(self, groups, weights, step=0):
        """For [(prompt example, [reply, ...]), ...]: the rewards of each
        group's replies, and the mean of each weighted score (with Curate's
        reward, also the mean of each of its components). `step` is the
        step the replies are for, as Curate keeps them."""
        per_group = []
        for p, replies in groups:
            self.run.stop.check()
            scores = [scoring.heuristic_scores(p.query, r, p.context, self.budget) for r in replies]
            if "rm" in weights:
                for s, rm in zip(scores, self.reward_model.score(p.prompt, replies)):
                    s["rm"] = rm
            per_group.append(scores)
        if "judge" in weights:
            items = [(p.prompt, p.context, r) for p, replies in groups for r in replies]
            judged = iter(self.judge.score(items))
            for scores in per_group:
                for s in scores:
                    s["judge"] = next(judged)
        components = {}
        if "curate" in weights:
            self.run.stop.check()
            items = [(p.query, p.context, r) for p, replies in groups for r in replies]
            scored = self.curate.score(step, items)
            if all(x.reward is None for x in scored):
                raise TrainerError(f"policy.rlaif: Curate scored none of step {step}'s {len(scored)} samples: "
                                   f"{scored[0].invalid or 'no reward'}")
            unscored = sum(1 for x in scored if x.reward is None)
            if unscored:
                log.warning("step %d: Curate could not score %d of %d samples (%s); they count as 0", step, unscored,
                            len(scored), next(x.invalid for x in scored if x.reward is None))
            it = iter(scored)
            for scores in per_group:
                for s in scores:
                    x = next(it)
                    s["curate"] = 0.0 if x.reward is None else x.reward
                    for name, v in x.components.items():
                        components.setdefault(name, []).append(v)
        rewards = [[scoring.combine(s, weights) for s in scores] for scores in per_group]
        breakdown = scoring.mean_scores([s for scores in per_group for s in scores], weights)
        for name, values in components.items():
            breakdown.setdefault(name, sum(values) / len(values))
        return rewards, breakdown


def split_holdout(train, evaluation, limit, seed):
    """(training prompts, held-out prompts): the eval prompts, or a seeded
    tenth of the training ones (at least one, when two or more); at most
    `limit` held out."""
    if evaluation:
        return list(train), list(evaluation)[:limit]
    if len(train) < 2:
        return list(train), []
    order = list(train)
    random.Random(seed).shuffle(order)
    n = min(limit, max(1, round(HOLDOUT_SHARE * len(order))))
    return order[n:], order[:n]


def stop_ids(model, tokenizer):
    ids = {tokenizer.eos_token_id}
    configured = getattr(model.generation_config, "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured:
        ids.update(configured)
    ids.discard(None)
    return ids


def sample(run, model, tokenizer, fmt, prompts, n, pc, greedy=False):
    """n replies per prompt: per prompt a list of (prompt ids, reply ids,
    reply text). Greedy when asked (the held-out check), else sampled with
    policy.sampling_temperature and top_p."""
    prompt_room = max(16, run.hp.max_length - pc.max_new_tokens)
    kwargs = dict(max_new_tokens=pc.max_new_tokens, num_return_sequences=n, pad_token_id=tokenizer.pad_token_id,
                  use_cache=True, do_sample=not greedy)
    if not greedy:
        kwargs.update(temperature=pc.sampling_temperature, top_p=pc.top_p)
    if getattr(model.generation_config, "eos_token_id", None) is None:
        kwargs["eos_token_id"] = tokenizer.eos_token_id
    stops = stop_ids(model, tokenizer)
    ids = [fmt.encode_prompt(p.prompt, prompt_room) for p in prompts]
    input_ids = losses.pad(ids, tokenizer.pad_token_id, side="left").to(run.device)
    attention_mask = losses.pad([[1] * len(x) for x in ids], 0, side="left").to(run.device)
    model.eval()
    with torch.no_grad():
        generated = model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
    replies = generated[:, input_ids.shape[1]:].tolist()
    out = []
    for i, prompt_ids in enumerate(ids):
        group = []
        for tokens in replies[i * n:(i + 1) * n]:
            reply = rl.cut_completion(tokens, stops)
            text = tokenizer.decode(reply, skip_special_tokens=True).strip()
            group.append((prompt_ids, reply, text))
        out.append(group)
    return out


def train(run, train_examples, eval_examples):
    cfg, hp, pc = run.cfg, run.hp, run.cfg.policy
    algorithm = cfg.method
    run.emitter.progress("loading")
    tokenizer = runtime.load_tokenizer(cfg.base_model)
    fmt = ChatFormat(tokenizer)
    model = runtime.add_lora(run, runtime.load_causal_lm(run, cfg.base_model), "CAUSAL_LM")
    # The old and new log-probabilities of a step must come from the same network.
    runtime.disable_dropout(model)
    log.info("%s with LoRA: %s; %d replies per prompt, reward %s", algorithm, runtime.trainable_summary(model),
             pc.group_size, pc.weights)
    scorer = Scorer(run, pc)
    prompts, holdout = split_holdout(train_examples, eval_examples, pc.holdout_prompts, cfg.seed)
    if not prompts:
        raise TrainerError("train_file: no prompts left to train on after holding some out")
    if not holdout:
        log.warning("no held-out prompts: the reward-hacking check is off")
    value_head = None
    if algorithm == "ppo":
        value_head = torch.nn.Linear(model.config.hidden_size, 1).to(run.device)
        # Values start at 0, so the first advantages are the rewards themselves.
        torch.nn.init.zeros_(value_head.weight)
        torch.nn.init.zeros_(value_head.bias)

    steps_per_epoch = math.ceil(len(prompts) / hp.batch_size)
    total = steps_per_epoch * hp.epochs
    if hp.max_steps:
        total = min(total, hp.max_steps)
    settings = rl.Settings.from_config(algorithm, hp, pc, total * pc.updates_per_batch)
    opt = rl.PolicyOptimizer(model, model.disable_adapter, settings, tokenizer.pad_token_id, run.device, value_head)
    kl_bound = KLBound(pc.kl_max)
    hacking = RewardHacking(pc.holdout_patience, pc.holdout_tolerance)
    rng = random.Random(cfg.seed)
    state = {"step": 0, "best": None, "stopped": None, "recent": []}

    def checkpoint(name):
        runtime.save_model(run, model, tokenizer, f"checkpoints/{name}", "checkpoint")

    def check_holdout(epoch):
        if not holdout:
            return
        step = state["step"]
        run.emitter.progress("evaluating", step=step, total_steps=total, epoch=epoch)
        replies = []
        for i in range(0, len(holdout), pc.micro_batch_size):
            run.stop.check()
            batch = holdout[i:i + pc.micro_batch_size]
            replies += [(p, [g[0][2]]) for p, g in zip(batch, sample(run, model, tokenizer, fmt, batch, 1, pc, greedy=True))]
        rewards, _ = scorer.rewards(replies, pc.holdout_weights)
        score = sum(r[0] for r in rewards) / len(rewards)
        recent = state["recent"]
        train_reward = sum(recent) / len(recent) if recent else None
        state["recent"] = []
        run.emitter.metric({"step": step, "epoch": epoch, "heldout_score": score, "train_reward": train_reward},
                           phase="evaluating")
        improved, reason = hacking.record(step, train_reward, score)
        if improved:
            state["best"] = snapshot(model)
        if reason:
            restore(model, state["best"])
            state["stopped"] = reason
            run.emitter.stop(reason, step=step, epoch=epoch)

    epoch = 1
    previous = None
    try:
        check_holdout(0)
        for epoch in range(1, hp.epochs + 1):
            order = list(prompts)
            rng.shuffle(order)
            for start in range(0, len(order), hp.batch_size):
                if state["stopped"] or state["step"] >= total:
                    break
                run.stop.check()
                batch = order[start:start + hp.batch_size]
                step = state["step"]
                run.emitter.progress("generating", step=step, total_steps=total, epoch=epoch)
                groups = sample(run, model, tokenizer, fmt, batch, pc.group_size, pc)
                run.emitter.progress("scoring", step=step, total_steps=total, epoch=epoch)
                rewards, breakdown = scorer.rewards([(p, [t for _, _, t in g]) for p, g in zip(batch, groups)],
                                                    pc.weights, step=step + 1)
                sequences = [(p_ids + reply, [IGNORE] * len(p_ids) + reply)
                             for g in groups for p_ids, reply, _ in g]
                flat = [r for rs in rewards for r in rs]
                rollout = opt.rollout(sequences, flat)
                reason = kl_bound.check(step, rollout.kl)
                if reason:
                    if previous is not None:
                        restore(model, previous)
                    state["stopped"] = reason
                    run.emitter.stop(reason, step=step, epoch=epoch)
                    break
                previous = snapshot(model)
                lr = opt.lr
                run.emitter.progress("training", step=step, total_steps=total, epoch=epoch)
                figures = opt.update(rollout)
                state["step"] = step = step + 1
                mean = sum(flat) / len(flat)
                if step == 1:
                    hacking.start_reward(mean)
                state["recent"].append(mean)
                lengths = [len(reply) for g in groups for _, reply, _ in g]
                run.emitter.progress("training", step=step, total_steps=total, epoch=epoch)
                run.emitter.metric({
                    "step": step, "epoch": epoch, "loss": figures["loss"], "lr": lr,
                    "reward": mean, "reward_std": _std(flat), "kl": rollout.kl,
                    "clip_fraction": figures["clip_fraction"], "grad_norm": figures["grad_norm"],
                    "value_loss": figures.get("value_loss"),
                    "response_length": sum(lengths) / len(lengths), "reward_breakdown": breakdown,
                })
                if hp.save_steps and step % hp.save_steps == 0:
                    checkpoint(f"step_{step}")
                if step % pc.holdout_every == 0:
                    check_holdout(epoch)
            if state["stopped"] or state["step"] >= total:
                break
        if not state["stopped"] and state["step"] % pc.holdout_every:
            check_holdout(epoch)
    except Cancelled:
        checkpoint(f"step_{state['step']}")
        raise
    log.info("trained %d steps%s", state["step"], f"; stopped: {state['stopped']}" if state["stopped"] else "")
    runtime.save_model(run, model, tokenizer, "final", "adapter")


def _std(values):
    n = len(values)
    if n < 2:
        return 0.0
    m = sum(values) / n
    return math.sqrt(sum((v - m) ** 2 for v in values) / (n - 1))

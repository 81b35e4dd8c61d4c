"""Policy optimisation on sampled replies: the GRPO and PPO updates.

Needs torch alone (no transformers, no peft), so a tiny model tests it on a
CPU. A model is called as model(input_ids=..., attention_mask=...) and
returns an object with ``logits`` (and ``hidden_states`` when asked with
output_hidden_states=True, for PPO's value head). The reference policy is
the same model inside ``reference()``, a context manager: for a PEFT model
``model.disable_adapter``, so no second copy of the weights is loaded.

One step, from a batch of prompts with `group_size` sampled replies each:

1. rollout: the replies' per-token log-probabilities under the policy that
   sampled them (old) and under the reference, the mean KL between the two,
   and the advantages: GRPO normalises each reply's score within its group;
   PPO gives every token a reward of -kl_coef * (log pi - log ref), adds the
   score on the last token, and runs GAE over the value head's estimates.
2. update: updates_per_batch passes over the rollout, each one optimizer
   step (in micro-batches of micro_batch_size sequences), minimising the
   clipped surrogate, plus kl_coef * KL (GRPO) or value_coef * the value
   loss (PPO). The math is in losses.py.
"""

from dataclasses import dataclass
from typing import Optional

import torch

from . import losses
from .errors import TrainerError
from .schedule import lr_factor
from .training import grad_norm

ALGORITHMS = ("grpo", "ppo")


def cut_completion(tokens, stop_ids):
    """A generated reply's tokens up to and including the first stop token
    (end of sequence); all of them when none came (the length ran out).
    Padding after the stop token is dropped with it."""
    for i, t in enumerate(tokens):
        if t in stop_ids:
            return list(tokens[:i + 1])
    return list(tokens)


def forward(model, input_ids, attention_mask, hidden=False):
    """Float32 next-token logits (as losses.token_logits) and, with hidden,
    the last layer's hidden states at the same positions."""
    if hidden:
        out = model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        return out.logits[:, :-1, :].float(), out.hidden_states[-1][:, :-1, :].float()
    out = model(input_ids=input_ids, attention_mask=attention_mask)
    return out.logits[:, :-1, :].float(), None


@dataclass
class Settings:
    algorithm: str
    learning_rate: float
    total_updates: int  # optimizer steps in the whole run, for the schedule
    group_size: int = 4
    clip_epsilon: float = 0.2
    kl_coef: float = 0.04
    updates_per_batch: int = 2
    micro_batch_size: int = 8
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    warmup_steps: int = 0
    scheduler: str = "constant"
    value_coef: float = 0.1
    value_clip: float = 0.2
    gamma: float = 1.0
    lam: float = 0.95

    @classmethod
    def from_config(cls, algorithm, hp, pc, total_updates):
        return cls(algorithm=algorithm, learning_rate=hp.learning_rate, total_updates=total_updates,
                   group_size=pc.group_size, clip_epsilon=pc.clip_epsilon, kl_coef=pc.kl_coef,
                   updates_per_batch=pc.updates_per_batch, micro_batch_size=pc.micro_batch_size,
                   weight_decay=hp.weight_decay, max_grad_norm=hp.max_grad_norm,
                   warmup_steps=hp.warmup_steps or 0, scheduler=hp.lr_scheduler,
                   value_coef=pc.value_coef, value_clip=pc.value_clip, gamma=pc.gamma, lam=pc.lam)


@dataclass
class Rollout:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor
    mask: torch.Tensor  # (n, length - 1), 1.0 on the generated tokens
    scores: torch.Tensor  # (n,)
    old_logprobs: torch.Tensor
    ref_logprobs: torch.Tensor
    advantages: torch.Tensor  # (n,) for GRPO, (n, length - 1) for PPO
    kl: float  # mean per-token KL(policy || reference) of the sampling policy
    returns: Optional[torch.Tensor] = None
    old_values: Optional[torch.Tensor] = None

    @property
    def size(self):
        return self.input_ids.shape[0]


class PolicyOptimizer:
    """The optimizer and the GRPO or PPO update of one model.

    value_head (PPO): a module mapping hidden states to one value each;
    it is trained with the adapter and only used in training."""

    def __init__(self, model, reference, settings, pad_token_id, device, value_head=None):
        if settings.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown algorithm {settings.algorithm!r}")
        if settings.algorithm == "ppo" and value_head is None:
            raise ValueError("ppo needs a value head")
        self.model = model
        self.reference = reference
        self.s = settings
        self.pad = pad_token_id
        self.device = device
        self.value_head = value_head
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            raise TrainerError("the model has no trainable parameters")
        if value_head is not None:
            params += list(value_head.parameters())
        self.params = params
        self.optimizer = torch.optim.AdamW(params, lr=settings.learning_rate, weight_decay=settings.weight_decay)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            lambda i: lr_factor(i, settings.warmup_steps, max(settings.total_updates, 1), settings.scheduler))

    @property
    def ppo(self):
        return self.s.algorithm == "ppo"

    def _chunks(self, n):
        step = self.s.micro_batch_size
        return [slice(i, min(i + step, n)) for i in range(0, n, step)]

    def rollout(self, sequences, scores):
        """The rollout of (ids, labels) sequences (prompt tokens labelled
        IGNORE, the sampled reply labelled) and their scores, in groups of
        group_size consecutive sequences."""
        if len(sequences) != len(scores):
            raise ValueError("one score per sequence")
        ids, attn, labels = losses.collate(sequences, self.pad, self.device)
        scores = torch.tensor(scores, dtype=torch.float32, device=self.device)
        old, ref, values, masks = [], [], [], []
        with torch.no_grad():
            for rows in self._chunks(len(sequences)):
                logits, hidden = forward(self.model, ids[rows], attn[rows], hidden=self.ppo)
                lp, mask = losses.token_logprobs(logits, labels[rows])
                old.append(lp)
                masks.append(mask)
                if self.ppo:
                    values.append(self.value_head(hidden).squeeze(-1) * mask)
                with self.reference():
                    ref_logits, _ = forward(self.model, ids[rows], attn[rows])
                ref.append(losses.token_logprobs(ref_logits, labels[rows])[0])
            old, ref, mask = torch.cat(old), torch.cat(ref), torch.cat(masks)
            kl = losses.masked_mean(losses.kl_estimate(old, ref), mask, per_sequence=True).item()
            r = Rollout(input_ids=ids, attention_mask=attn, labels=labels, mask=mask, scores=scores,
                        old_logprobs=old, ref_logprobs=ref, advantages=None, kl=kl)
            if self.ppo:
                r.old_values = torch.cat(values)
                token_rewards = losses.ppo_token_rewards(scores, old, ref, mask, self.s.kl_coef)
                adv, r.returns = losses.gae(token_rewards, r.old_values, mask, self.s.gamma, self.s.lam)
                r.advantages = losses.whiten(adv, mask)
            else:
                r.advantages = losses.group_advantages(scores, self.s.group_size)
        return r

    def update(self, r):
        """updates_per_batch optimizer steps on the rollout; returns the
        step's figures (loss, clip fraction, the gradient norm before
        clipping, and for PPO the value loss),
        each averaged over the passes."""
        s = self.s
        total_tokens = r.mask.sum().clamp(min=1)
        sums = {"loss": 0.0, "clip_fraction": 0.0, "grad_norm": 0.0}
        if self.ppo:
            sums["value_loss"] = 0.0
        self.model.train()
        for _ in range(s.updates_per_batch):
            for rows in self._chunks(r.size):
                logits, hidden = forward(self.model, r.input_ids[rows], r.attention_mask[rows], hidden=self.ppo)
                lp, mask = losses.token_logprobs(logits, r.labels[rows])
                tokens = mask.sum() / total_tokens
                if self.ppo:
                    policy, clipped = losses.clipped_policy_loss(lp, r.old_logprobs[rows], r.advantages[rows], mask,
                                                                 s.clip_epsilon, per_sequence=False)
                    values = self.value_head(hidden).squeeze(-1)
                    vloss, _ = losses.value_loss(values, r.old_values[rows], r.returns[rows], mask, s.value_clip)
                    loss = policy + s.value_coef * vloss
                    weight = tokens  # PPO averages over every token of the rollout
                    sums["value_loss"] += vloss.item() * weight.item()
                else:
                    kl = losses.kl_estimate(lp, r.ref_logprobs[rows])
                    loss, clipped = losses.clipped_policy_loss(lp, r.old_logprobs[rows], r.advantages[rows], mask,
                                                               s.clip_epsilon, kl=kl, kl_coef=s.kl_coef)
                    weight = torch.tensor((rows.stop - rows.start) / r.size)  # GRPO: per sequence
                if not torch.isfinite(loss):
                    raise TrainerError(f"the loss became {loss.item()}; try a lower learning_rate or kl_coef")
                (loss * weight).backward()
                sums["loss"] += loss.item() * weight.item()
                sums["clip_fraction"] += clipped.item() * tokens.item()
            sums["grad_norm"] += grad_norm(self.params, s.max_grad_norm)
            self.optimizer.step()
            self.schedule.step()
            self.optimizer.zero_grad(set_to_none=True)
        return {k: v / s.updates_per_batch for k, v in sums.items()}

    @property
    def lr(self):
        return self.schedule.get_last_lr()[0]

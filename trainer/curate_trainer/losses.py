"""The trainer's tensor math: batching token ids with their loss labels, the
log-probability of the labelled tokens, the SFT, DPO and Bradley-Terry
losses, and the policy-optimisation pieces of GRPO and PPO (group-normalised
advantages, the clipped surrogate, the KL estimator, GAE and the value loss).

This module needs torch and nothing else (no transformers, no peft), so its
tests run on a CPU wherever torch is installed. A model here is anything
called as model(input_ids=..., attention_mask=...) that returns an object
with ``logits`` of shape (batch, length, vocabulary).
"""

import torch

from .chat import IGNORE


def pad(sequences, value, side="right"):
    """A 2-D long tensor of the sequences padded to the longest."""
    width = max(len(s) for s in sequences)
    rows = []
    for s in sequences:
        fill = [value] * (width - len(s))
        rows.append(list(s) + fill if side == "right" else fill + list(s))
    return torch.tensor(rows, dtype=torch.long)


def collate(pairs, pad_token_id, device):
    """input_ids, attention_mask and labels on `device` from (ids, labels)
    pairs. Padding is labelled IGNORE, so no loss ever counts it."""
    input_ids = pad([ids for ids, _ in pairs], pad_token_id)
    attention_mask = pad([[1] * len(ids) for ids, _ in pairs], 0)
    labels = pad([labels for _, labels in pairs], IGNORE)
    return input_ids.to(device), attention_mask.to(device), labels.to(device)


def token_logits(model, input_ids, attention_mask):
    """Float32 logits predicting each next token: position t scores token
    t + 1, and the last position (which predicts past the end) is dropped."""
    out = model(input_ids=input_ids, attention_mask=attention_mask)
    return out.logits[:, :-1, :].float()


def labelled_logprobs(logits, labels):
    """Per sequence, the sum of log p(token) over the tokens whose label is
    not IGNORE; `logits` come from token_logits, `labels` cover the whole
    sequence (the first token has no prediction and is never counted)."""
    targets = labels[:, 1:]
    nll = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), targets, ignore_index=IGNORE, reduction="none")
    return -(nll * (targets != IGNORE)).sum(dim=-1)


def sequence_logprobs(model, input_ids, attention_mask, labels):
    """Sum of log-probabilities of the labelled tokens of each sequence."""
    return labelled_logprobs(token_logits(model, input_ids, attention_mask), labels)


def token_loss(logits, labels, reduction="mean"):
    """SFT's next-token cross-entropy over the labelled tokens, and how many
    tokens it covers; `logits` and `labels` as for labelled_logprobs."""
    targets = labels[:, 1:]
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE, reduction=reduction)
    return loss, int((targets != IGNORE).sum().item())


def dpo_loss(policy_chosen, policy_rejected, reference_chosen, reference_rejected, beta):
    """DPO's loss (mean over the pairs) and each pair's implicit rewards,
    from summed reply log-probabilities under the policy and the reference:

        chosen_reward   = beta * (log pi(chosen)   - log ref(chosen))
        rejected_reward = beta * (log pi(rejected) - log ref(rejected))
        loss            = -log sigmoid(chosen_reward - rejected_reward)

    The rewards come back detached: they are only reported."""
    chosen = beta * (policy_chosen - reference_chosen)
    rejected = beta * (policy_rejected - reference_rejected)
    loss = -torch.nn.functional.logsigmoid(chosen - rejected).mean()
    return loss, chosen.detach(), rejected.detach()


def bradley_terry_loss(chosen, rejected):
    """The pairwise ranking loss -log sigmoid(r_chosen - r_rejected), mean over the pairs."""
    return -torch.nn.functional.logsigmoid(chosen - rejected).mean()


def rating_mse(scores, targets):
    """Mean squared error of sigmoid(score) against each target in [0, 1],
    over the scores whose target is not None; None when none has one."""
    rated = [i for i, t in enumerate(targets) if t is not None]
    if not rated:
        return None
    predicted = torch.sigmoid(scores[rated])
    wanted = torch.tensor([targets[i] for i in rated], device=scores.device, dtype=scores.dtype)
    return torch.nn.functional.mse_loss(predicted, wanted)


def preference_summary(chosen, rejected, prefix=""):
    """The DPO metrics of a batch from its pairs' rewards; a pair counts as
    preferred only when its margin is above zero (a tie is not)."""
    margin = chosen - rejected
    return {
        prefix + "reward_margin": margin.mean().item(),
        prefix + "preference_accuracy": (margin > 0).float().mean().item(),
        prefix + "chosen_reward": chosen.mean().item(),
        prefix + "rejected_reward": rejected.mean().item(),
    }


# --- Policy optimisation (GRPO, PPO) ---------------------------------------
#
# Per-token tensors below have shape (batch, length - 1), aligned with
# token_logits: position t belongs to token t + 1 of the sequence. `mask` is
# 1.0 on the generated tokens (the labelled ones) and 0.0 elsewhere.


def token_logprobs(logits, labels):
    """log p(token) of each next token, 0 where the label is IGNORE, and the
    float mask of the labelled positions."""
    targets = labels[:, 1:]
    nll = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), targets, ignore_index=IGNORE, reduction="none")
    mask = (targets != IGNORE).to(logits.dtype)
    return -nll * mask, mask


def masked_mean(values, mask, per_sequence=False):
    """Mean of values over the masked positions: over all of them, or (with
    per_sequence) each sequence's own mean first, then the mean of those.
    A sequence with no masked position counts as 0."""
    if per_sequence:
        per = (values * mask).sum(dim=-1) / mask.sum(dim=-1).clamp(min=1)
        return per.mean()
    return (values * mask).sum() / mask.sum().clamp(min=1)


def group_advantages(rewards, group_size, eps=1e-4):
    """GRPO's advantages: each reward minus its group's mean, over the
    group's standard deviation (the sample one, n - 1) plus eps. Groups are
    consecutive runs of group_size rewards; a group whose rewards are all
    equal has advantages 0."""
    if rewards.numel() % group_size:
        raise ValueError(f"{rewards.numel()} rewards do not split into groups of {group_size}")
    grouped = rewards.view(-1, group_size)
    mean = grouped.mean(dim=1, keepdim=True)
    std = grouped.std(dim=1, keepdim=True) if group_size > 1 else torch.zeros_like(mean)
    return ((grouped - mean) / (std + eps)).view(-1)


def kl_estimate(logprobs, ref_logprobs):
    """The per-token estimator of KL(policy || reference) that GRPO uses
    (Schulman's k3): exp(d) - d - 1 with d = log ref - log policy. It is
    never negative and is 0 where the two agree."""
    d = ref_logprobs - logprobs
    return torch.exp(d) - d - 1


def clipped_policy_loss(logprobs, old_logprobs, advantages, mask, epsilon, kl=None, kl_coef=0.0,
                        per_sequence=True):
    """PPO's clipped surrogate, as a loss to minimise, per token:

        ratio = exp(log pi - log pi_old)
        loss  = -min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A) + kl_coef * kl

    averaged over the masked tokens (per sequence first, as GRPO does, or
    over all tokens). `advantages` is one value per sequence (GRPO) or per
    token (PPO). Also returns the clip fraction: the share of masked tokens
    whose gradient the clip removed (ratio above 1 + eps with A > 0, or
    below 1 - eps with A < 0)."""
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + epsilon) * advantages
    per_token = -torch.min(unclipped, clipped)
    if kl is not None and kl_coef:
        per_token = per_token + kl_coef * kl
    was_clipped = ((ratio > 1 + epsilon) & (advantages > 0)) | ((ratio < 1 - epsilon) & (advantages < 0))
    fraction = masked_mean(was_clipped.to(mask.dtype), mask).detach()
    return masked_mean(per_token, mask, per_sequence), fraction


def ppo_token_rewards(scores, logprobs, ref_logprobs, mask, kl_coef):
    """PPO's per-token rewards: -kl_coef * (log pi - log ref) on every
    generated token (the k1 KL estimate) and the sequence's score added on
    its last generated token."""
    rewards = -kl_coef * (logprobs - ref_logprobs) * mask
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(mask)
    last = torch.where(mask > 0, positions, torch.full_like(positions, -1)).max(dim=1).values
    rows = torch.nonzero(last >= 0).squeeze(-1)
    rewards[rows, last[rows]] += scores[rows].to(rewards.dtype)
    return rewards


def gae(rewards, values, mask, gamma=1.0, lam=0.95):
    """Generalised advantage estimation over each sequence's masked tokens
    (a contiguous run): delta_t = r_t + gamma * V_{t+1} - V_t with V = 0
    after the last token, A_t = delta_t + gamma * lam * A_{t+1}. Returns
    (advantages, returns = advantages + values), 0 off the mask."""
    length = rewards.shape[1]
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(length)):
        if t + 1 < length:
            next_mask = mask[:, t + 1]
            next_value = values[:, t + 1] * next_mask
        else:
            next_mask = torch.zeros_like(mask[:, t])
            next_value = next_mask
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = (delta + gamma * lam * running * next_mask) * mask[:, t]
        advantages[:, t] = running
    return advantages, (advantages + values) * mask


def whiten(values, mask, eps=1e-8):
    """Values over the masked positions shifted to mean 0 and scaled by the
    sample standard deviation (n - 1, as TRL's PPO whitens its advantages;
    the population one when only one position is masked); 0 off the mask."""
    mean = masked_mean(values, mask)
    var = masked_mean((values - mean) ** 2, mask)
    n = mask.sum()
    if n > 1:
        var = var * n / (n - 1)
    return (values - mean) * torch.rsqrt(var + eps) * mask


def value_loss(values, old_values, returns, mask, clip):
    """PPO's clipped value loss, 0.5 * mean over the masked tokens of
    max((V - R)^2, (V_clipped - R)^2), with V_clipped = V_old + clip(V -
    V_old, -clip, clip); and the share of tokens where the clipped term won."""
    clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    a = (values - returns) ** 2
    b = (clipped - returns) ** 2
    loss = 0.5 * masked_mean(torch.max(a, b), mask)
    return loss, masked_mean((b > a).to(mask.dtype), mask).detach()

"""The PPO loss of TRL's last published PPOTrainer (trl.experimental.ppo,
gone from TRL 1.x), restated step by step for test_trl_agreement.py: the
per-token rewards, GAE and advantage whitening of its rollout, and its
clipped policy and value losses. Names follow TRL's.

Two things TRL's trainer does that Curate does not, both about padding:
it fills padded log-probabilities with INVALID_LOGPROB (1.0), and it puts
the score one position after a reply that ends before the generation
length (on the first padding position, which its value mask also covers).
Curate puts the score on the reply's last token. On replies that fill the
generation length the two rollouts are the same; the loss step is the same
on any mask.
"""

import torch

INVALID_LOGPROB = 1.0


def masked_mean(values, mask):
    return (values * mask).sum() / mask.sum()


def masked_var(values, mask):
    """TRL's masked variance: unbiased (Bessel's correction)."""
    mean = masked_mean(values, mask)
    variance = masked_mean((values - mean) ** 2, mask)
    n = mask.sum()
    return variance * n / (n - 1)


def masked_whiten(values, mask):
    return (values - masked_mean(values, mask)) * torch.rsqrt(masked_var(values, mask) + 1e-8)


def rollout(logprobs, ref_logprobs, values, scores, sequence_lengths, kl_coef, gamma, lam):
    """Rewards, advantages and returns of one rollout; sequence_lengths is
    the index of each reply's last token (TRL's `sequence_length`)."""
    n, length = logprobs.shape
    idx = torch.arange(length).repeat(n, 1)
    padding_mask = idx > sequence_lengths.unsqueeze(1)
    padding_mask_p1 = idx > (sequence_lengths + 1).unsqueeze(1)
    logprobs = torch.masked_fill(logprobs, padding_mask, INVALID_LOGPROB)
    ref_logprobs = torch.masked_fill(ref_logprobs, padding_mask, INVALID_LOGPROB)
    values = torch.masked_fill(values, padding_mask_p1, 0)
    kl = -(ref_logprobs - logprobs)  # the k1 estimator, TRL's default
    rewards = -kl_coef * kl
    p1 = sequence_lengths + 1
    end = torch.where(p1 < length, p1, sequence_lengths)
    rewards[torch.arange(n), end] += scores
    last, reversed_advantages = 0, []
    for t in reversed(range(length)):
        next_values = values[:, t + 1] if t < length - 1 else 0.0
        delta = rewards[:, t] + gamma * next_values - values[:, t]
        last = delta + gamma * lam * last
        reversed_advantages.append(last)
    advantages = torch.stack(reversed_advantages[::-1], dim=1)
    returns = advantages + values
    advantages = torch.masked_fill(masked_whiten(advantages, ~padding_mask), padding_mask, 0)
    return {"rewards": rewards, "advantages": advantages, "returns": returns}


def loss(new_logprobs, logprobs, advantages, vpred, values, returns, padding_mask, value_padding_mask, cliprange,
         cliprange_value, vf_coef):
    """One micro-batch's loss: the clipped policy loss over the reply tokens
    plus vf_coef times the clipped value loss."""
    new_logprobs = torch.masked_fill(new_logprobs, padding_mask, INVALID_LOGPROB)
    logprobs = torch.masked_fill(logprobs, padding_mask, INVALID_LOGPROB)
    vpred = torch.masked_fill(vpred, value_padding_mask, 0)
    vpredclipped = torch.clamp(vpred, values - cliprange_value, values + cliprange_value)
    vf_losses1 = torch.square(vpred - returns)
    vf_losses2 = torch.square(vpredclipped - returns)
    vf_loss = 0.5 * masked_mean(torch.max(vf_losses1, vf_losses2), ~value_padding_mask)
    ratio = torch.exp(new_logprobs - logprobs)
    pg_losses = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1.0 - cliprange, 1.0 + cliprange)
    pg_loss = masked_mean(torch.max(pg_losses, pg_losses2), ~padding_mask)
    pg_clipfrac = masked_mean((pg_losses2 > pg_losses).float(), ~padding_mask)
    return {"loss": pg_loss + vf_coef * vf_loss, "pg_loss": pg_loss, "vf_loss": vf_loss, "pg_clipfrac": pg_clipfrac}

"""The trainer's tensor math: batching token ids with their loss labels, the
log-probability of the labelled tokens, and the SFT, DPO and Bradley-Terry
losses.

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

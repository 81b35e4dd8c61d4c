"""Direct Preference Optimization with LoRA.

The reference model is the same network with the adapter switched off, so
only one copy of the weights is in memory. For each pair,

    chosen_reward   = beta * (log pi(chosen)   - log ref(chosen))
    rejected_reward = beta * (log pi(rejected) - log ref(rejected))
    loss            = -log sigmoid(chosen_reward - rejected_reward)

where log pi is the summed log-probability of the reply's tokens (the math
is in losses.py).
"""

import logging

import torch

from . import losses, runtime
from .chat import ChatFormat
from .errors import Cancelled, TrainerError
from .training import Loop, LoopSettings

log = logging.getLogger("curate_trainer")


def encode_pairs(fmt, examples, max_length, field):
    """((chosen ids, labels), (rejected ids, labels), example) per preference pair."""
    encoded = []
    for ex in examples:
        try:
            chosen = fmt.encode_pair(ex.prompt, ex.chosen, max_length)
            rejected = fmt.encode_pair(ex.prompt, ex.rejected, max_length)
        except Exception as e:  # a chat template can reject a conversation
            raise TrainerError(f"{field} line {ex.line}: could not format the conversation: {e}") from None
        encoded.append((chosen, rejected, ex))
    return encoded


def preference_stats(model, batch, run, pad_token_id, beta):
    """Loss (mean over the batch) and the per-pair chosen and rejected rewards."""
    sequences = [c for c, _, _ in batch] + [r for _, r, _ in batch]
    input_ids, attention_mask, labels = losses.collate(sequences, pad_token_id, run.device)
    n = len(batch)
    with torch.no_grad(), model.disable_adapter():
        reference = losses.sequence_logprobs(model, input_ids, attention_mask, labels)
    policy = losses.sequence_logprobs(model, input_ids, attention_mask, labels)
    return losses.dpo_loss(policy[:n], policy[n:], reference[:n], reference[n:], beta)


def train(run, train_examples, eval_examples):
    hp = run.hp
    run.emitter.progress("loading")
    tokenizer = runtime.load_tokenizer(run.cfg.base_model)
    fmt = ChatFormat(tokenizer)
    train_items = encode_pairs(fmt, train_examples, hp.max_length, "train_file")
    eval_items = encode_pairs(fmt, eval_examples, hp.max_length, "eval_file")
    model = runtime.load_causal_lm(run, run.cfg.base_model)
    model = runtime.add_lora(run, model, "CAUSAL_LM")
    runtime.disable_dropout(model)
    log.info("LoRA: %s; beta %.4g", runtime.trainable_summary(model), hp.beta)
    pad_id = tokenizer.pad_token_id

    def compute(batch):
        loss, chosen, rejected = preference_stats(model, batch, run, pad_id, hp.beta)
        return loss, losses.preference_summary(chosen, rejected)

    def evaluate():
        batch_losses, chosen_all, rejected_all = [], [], []
        for i in range(0, len(eval_items), hp.batch_size):
            run.stop.check()
            batch = eval_items[i:i + hp.batch_size]
            loss, chosen, rejected = preference_stats(model, batch, run, pad_id, hp.beta)
            batch_losses.append(loss.item() * len(batch))
            chosen_all.append(chosen)
            rejected_all.append(rejected)
        values = losses.preference_summary(torch.cat(chosen_all), torch.cat(rejected_all), prefix="eval_")
        values["eval_loss"] = sum(batch_losses) / len(eval_items)
        return values

    def checkpoint(name):
        runtime.save_model(run, model, tokenizer, f"checkpoints/{name}", "checkpoint")

    loop = Loop(run, model, train_items, compute, LoopSettings.from_hyperparameters(hp), run.cfg.seed,
                evaluate=evaluate if eval_items else None, checkpoint=checkpoint)
    try:
        loop.run_epochs()
    except Cancelled:
        checkpoint(f"step_{loop.global_step}")
        raise
    log.info("trained %d steps", loop.step)
    runtime.save_model(run, model, tokenizer, "final", "adapter")

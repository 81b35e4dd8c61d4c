"""Supervised fine-tuning with LoRA: next-token loss on the assistant replies only."""

import logging
import math

from . import losses, runtime
from .chat import ChatFormat
from .errors import Cancelled, TrainerError
from .training import Loop, LoopSettings

log = logging.getLogger("curate_trainer")


def encode(fmt, examples, max_length, field):
    """(ids, labels) per example; examples left with no trained token after
    cutting to max_length are dropped and counted in the log."""
    encoded = []
    for ex in examples:
        try:
            item = fmt.encode_chat(ex.messages, max_length)
        except Exception as e:  # a chat template can reject a conversation (roles out of order, say)
            raise TrainerError(f"{field} line {ex.line}: could not format the conversation: {e}") from None
        if item is not None:
            encoded.append(item)
    dropped = len(examples) - len(encoded)
    if dropped:
        log.warning("%s: %d of %d examples have no assistant tokens within max_length and are skipped",
                    field, dropped, len(examples))
    return encoded


def token_loss(model, batch, run, pad_token_id, reduction="mean"):
    input_ids, attention_mask, labels = losses.collate(batch, pad_token_id, run.device)
    return losses.token_loss(losses.token_logits(model, input_ids, attention_mask), labels, reduction)


def make_loop(run, model, tokenizer, train, eval_items, settings, seed, iter=None, step_offset=0, checkpoint=None):
    """The loop that trains `model` on encoded (ids, labels) pairs."""
    pad_id = tokenizer.pad_token_id

    def compute(batch):
        loss, _ = token_loss(model, batch, run, pad_id)
        return loss, {}

    def evaluate():
        total, count = 0.0, 0
        for i in range(0, len(eval_items), settings.batch_size):
            run.stop.check()
            loss, n = token_loss(model, eval_items[i:i + settings.batch_size], run, pad_id, reduction="sum")
            total += loss.item()
            count += n
        mean = total / max(count, 1)
        return {"eval_loss": mean, "eval_perplexity": math.exp(min(mean, 50.0))}

    return Loop(run, model, train, compute, settings, seed, evaluate=evaluate if eval_items else None,
                checkpoint=checkpoint, iter=iter, step_offset=step_offset)


def train(run, train_examples, eval_examples):
    hp = run.hp
    run.emitter.progress("loading")
    tokenizer = runtime.load_tokenizer(run.cfg.base_model)
    fmt = ChatFormat(tokenizer)
    log.info("formatting with %s", "the tokenizer's chat template" if fmt.uses_template else "the plain role: content layout")
    train_items = encode(fmt, train_examples, hp.max_length, "train_file")
    if not train_items:
        raise TrainerError(f"train_file: no example keeps an assistant token within max_length {hp.max_length}")
    eval_items = encode(fmt, eval_examples, hp.max_length, "eval_file")
    model = runtime.load_causal_lm(run, run.cfg.base_model)
    model = runtime.add_lora(run, model, "CAUSAL_LM")
    log.info("LoRA: %s", runtime.trainable_summary(model))

    def checkpoint(name):
        runtime.save_model(run, model, tokenizer, f"checkpoints/{name}", "checkpoint")

    loop = make_loop(run, model, tokenizer, train_items, eval_items, LoopSettings.from_hyperparameters(hp),
                     run.cfg.seed, checkpoint=checkpoint)
    try:
        loop.run_epochs()
    except Cancelled:
        checkpoint(f"step_{loop.global_step}")
        raise
    log.info("trained %d steps", loop.step)
    runtime.save_model(run, model, tokenizer, "final", "adapter")

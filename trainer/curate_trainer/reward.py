"""Reward model training: a one-output sequence classifier with LoRA on the
body and a fully trained score head.

Loss = ranking_weight * BT + mse_weight * MSE, where BT is the Bradley-Terry
pairwise loss -log sigmoid(r_chosen - r_rejected) and MSE compares
sigmoid(r) with (rating - 1) / 4 for the replies that carry a 1-5 rating
(both losses are in losses.py). The final model is saved with the LoRA
weights merged in, so ``final/`` loads with AutoModelForSequenceClassification
alone (irs.reward_model and policy.reward_model take it).

The defaults are the recipe of Curate's reward-model design (config.py):
learning rate 2e-5, batch 16, 5 epochs, weight decay 0.01, warmup of 500
steps or 10% of the steps when that is fewer, cosine decay, and early
stopping on the validation loss with the best epoch's weights kept. Each
evaluation reports the pairwise ranking accuracy, MSE, MAE and Pearson's r
against the ratings where the pairs have them, and the calibration of the
pairwise preference probabilities (evaluation.py).
"""

import logging

import torch

from . import evaluation, losses, runtime
from .chat import ChatFormat
from .errors import Cancelled, TrainerError
from .training import Loop, LoopSettings

log = logging.getLogger("curate_trainer")


def encode_pairs(fmt, examples, max_length, field):
    """(chosen ids, rejected ids, chosen target, rejected target) per pair;
    a target is the rating mapped to [0, 1], or None."""
    items = []
    for ex in examples:
        try:
            chosen, _ = fmt.encode_pair(ex.prompt, ex.chosen, max_length)
            rejected, _ = fmt.encode_pair(ex.prompt, ex.rejected, max_length)
        except Exception as e:  # a chat template can reject a conversation
            raise TrainerError(f"{field} line {ex.line}: could not format the conversation: {e}") from None
        items.append((chosen, rejected, _target(ex.rating_chosen), _target(ex.rating_rejected)))
    return items


def _target(rating):
    return None if rating is None else (rating - 1.0) / 4.0


def scores(model, run, sequences, pad_token_id):
    """The model's raw score for each token sequence."""
    input_ids = losses.pad(sequences, pad_token_id).to(run.device)
    attention_mask = losses.pad([[1] * len(s) for s in sequences], 0).to(run.device)
    out = model(input_ids=input_ids, attention_mask=attention_mask)
    return out.logits.squeeze(-1).float()


def pair_losses(model, run, batch, pad_token_id, hp):
    n = len(batch)
    r = scores(model, run, [c for c, _, _, _ in batch] + [rj for _, rj, _, _ in batch], pad_token_id)
    chosen, rejected = r[:n], r[n:]
    targets = [t for _, _, t, _ in batch] + [t for _, _, _, t in batch]
    return chosen, rejected, losses.bradley_terry_loss(chosen, rejected), losses.rating_mse(r, targets), r, targets


def train(run, train_examples, eval_examples):
    hp = run.hp
    run.emitter.progress("loading")
    tokenizer = runtime.load_tokenizer(run.cfg.base_model)
    fmt = ChatFormat(tokenizer)
    train_items = encode_pairs(fmt, train_examples, hp.max_length, "train_file")
    eval_items = encode_pairs(fmt, eval_examples, hp.max_length, "eval_file")
    pad_id = tokenizer.pad_token_id
    model = runtime.load_classifier(run, run.cfg.base_model, pad_id)
    model = runtime.add_lora(run, model, "SEQ_CLS")
    log.info("reward model, LoRA with a fully trained score head: %s", runtime.trainable_summary(model))

    def compute(batch):
        chosen, rejected, ranking, mse, _, _ = pair_losses(model, run, batch, pad_id, hp)
        loss = hp.ranking_weight * ranking
        values = {"ranking_loss": ranking.item(),
                  "accuracy": (chosen > rejected).float().mean().item()}
        if mse is not None:
            loss = loss + hp.mse_weight * mse
            values["mse_loss"] = mse.item()
        return loss, values

    def evaluate():
        ranking_sum, wins, predicted, wanted, margins = 0.0, 0, [], [], []
        for i in range(0, len(eval_items), hp.batch_size):
            run.stop.check()
            batch = eval_items[i:i + hp.batch_size]
            chosen, rejected, ranking, _, r, targets = pair_losses(model, run, batch, pad_id, hp)
            ranking_sum += ranking.item() * len(batch)
            wins += int((chosen > rejected).sum().item())
            margins += (chosen - rejected).tolist()
            probs = torch.sigmoid(r).tolist()
            for p, t in zip(probs, targets):
                if t is not None:
                    predicted.append(p)
                    wanted.append(t)
        n = len(eval_items)
        values = {"eval_loss": hp.ranking_weight * ranking_sum / n, "ranking_accuracy": wins / n}
        if predicted:
            mse = sum((p - t) ** 2 for p, t in zip(predicted, wanted)) / len(predicted)
            values["eval_loss"] += hp.mse_weight * mse
            values["eval_mse"] = mse
            values["eval_mae"] = sum(abs(p - t) for p, t in zip(predicted, wanted)) / len(predicted)
            if len(predicted) > 1:
                values["pearson"] = evaluation.pearson(predicted, wanted)
        values["calibration"], values["calibration_error"] = evaluation.calibration(margins)
        return values

    def checkpoint(name):
        runtime.save_model(run, model, tokenizer, f"checkpoints/{name}", "checkpoint")

    if not eval_items and hp.early_stopping_patience:
        log.info("no eval_file: early stopping and keeping the best epoch need one, so every epoch runs")
    loop = Loop(run, model, train_items, compute, LoopSettings.from_hyperparameters(hp, "reward"), run.cfg.seed,
                evaluate=evaluate if eval_items else None, checkpoint=checkpoint)
    try:
        loop.run_epochs()
    except Cancelled:
        checkpoint(f"step_{loop.global_step}")
        raise
    log.info("trained %d steps", loop.step)
    model.eval()
    merged = model.merge_and_unload()
    merged.config.pad_token_id = pad_id
    runtime.save_model(run, merged, tokenizer, "final", "reward_model")

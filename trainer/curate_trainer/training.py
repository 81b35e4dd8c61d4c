"""The optimisation loop every method shares: AdamW on the trainable
parameters, a warmup-then-decay schedule, gradient accumulation and clipping,
metric events, periodic checkpoints, evaluation after each epoch, early
stopping on the evaluation loss with the best weights kept, and a stop check
before every batch."""

import logging
import math
import random
from dataclasses import dataclass
from typing import Optional

import torch

from . import parallel
from .config import REWARD_WARMUP_SHARE, REWARD_WARMUP_STEPS
from .errors import TrainerError
from .guards import EarlyStopping
from .schedule import lr_factor

log = logging.getLogger("curate_trainer")


def grad_norm(params, max_norm):
    """The gradients' total L2 norm before clipping, as a float; clips
    them to max_norm when it is above 0."""
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm if max_norm > 0 else float("inf"))
    return float(norm)


def snapshot(model):
    """A copy, on the CPU, of the trainable parameters (the adapter and any
    fully trained head): all that training changes."""
    return {name: p.detach().to("cpu", copy=True) for name, p in model.named_parameters() if p.requires_grad}


def restore(model, saved):
    """Put the parameters of a snapshot back."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name in saved:
                p.copy_(saved[name].to(p.device))


@dataclass(frozen=True)
class LoopSettings:
    learning_rate: float
    epochs: int
    batch_size: int
    accumulation: int = 1
    max_steps: Optional[int] = None
    warmup_steps: int = 0
    # When above 0, the warmup is at most this share of the run's steps
    # (rounded up): the reward model warms up for 500 steps or 10%.
    warmup_share: float = 0.0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    scheduler: str = "linear"
    logging_steps: int = 1
    save_steps: int = 0
    early_stopping_patience: int = 0
    early_stopping_threshold: float = 0.0

    @classmethod
    def from_hyperparameters(cls, hp, method=None):
        warmup, share = hp.warmup_steps, 0.0
        if warmup is None:
            warmup, share = (REWARD_WARMUP_STEPS, REWARD_WARMUP_SHARE) if method == "reward" else (0, 0.0)
        return cls(learning_rate=hp.learning_rate, epochs=hp.epochs, batch_size=hp.batch_size,
                   accumulation=hp.gradient_accumulation_steps, max_steps=hp.max_steps,
                   warmup_steps=warmup, warmup_share=share, weight_decay=hp.weight_decay,
                   max_grad_norm=hp.max_grad_norm, scheduler=hp.lr_scheduler,
                   logging_steps=hp.logging_steps, save_steps=hp.save_steps,
                   early_stopping_patience=hp.early_stopping_patience,
                   early_stopping_threshold=hp.early_stopping_threshold)

    def total_steps(self, n_examples):
        batches = math.ceil(n_examples / self.batch_size)
        steps = math.ceil(batches / self.accumulation) * self.epochs
        return min(steps, self.max_steps) if self.max_steps else steps

    def warmup(self, total):
        """The warmup of a run of `total` optimizer steps."""
        if self.warmup_share > 0:
            return min(self.warmup_steps, math.ceil(self.warmup_share * total))
        return self.warmup_steps


class Loop:
    """Runs `compute` over shuffled batches of `examples`.

    compute(batch) -> (loss tensor, {name: float}) for one micro-batch.
    evaluate() -> {name: float}, run after each epoch with gradients off.
    checkpoint(name) saves the model under checkpoints/name.
    `step` counts optimizer steps; step_offset continues the count across IRS
    iterations, and `iter` tags the events of one.

    With an evaluation and early_stopping_patience, the loop keeps a copy of
    the trainable weights of the epoch with the lowest eval_loss, stops once
    `patience` evaluations in a row have not improved on it, and puts the
    best weights back at the end (best_epoch says which they are).
    """

    def __init__(self, run, model, examples, compute, settings, seed, evaluate=None,
                 checkpoint=None, iter=None, step_offset=0):
        self.run = run
        self.model = model
        self.examples = list(examples)
        self.compute = compute
        self.settings = settings
        self.evaluate = evaluate
        self.checkpoint = checkpoint
        self.iter = iter
        self.step_offset = step_offset
        self.rng = random.Random(seed)
        self.step = 0
        self.total = settings.total_steps(len(self.examples))
        self.warmup = settings.warmup(self.total)
        self.keep_best = evaluate is not None and settings.early_stopping_patience > 0
        self.early = EarlyStopping(settings.early_stopping_patience, settings.early_stopping_threshold)
        self.best_weights = None
        self.best_epoch = None
        self.best_step = None
        self.stopped = None  # the reason the loop stopped early

    @property
    def global_step(self):
        return self.step_offset + self.step

    def _groups(self):
        # One group of micro-batches per optimizer step.
        s = self.settings
        order = list(self.examples)
        self.rng.shuffle(order)
        micro = [order[i:i + s.batch_size] for i in range(0, len(order), s.batch_size)]
        return [micro[i:i + s.accumulation] for i in range(0, len(micro), s.accumulation)]

    def run_epochs(self):
        s = self.settings
        params = [p for p in self.model.parameters() if p.requires_grad]
        if not params:
            raise TrainerError("the model has no trainable parameters")
        optimizer = torch.optim.AdamW(params, lr=s.learning_rate, weight_decay=s.weight_decay)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda i: lr_factor(i, self.warmup, self.total, s.scheduler))
        # Sums and counts of each logged value since the last metric event; a
        # value some batches do not report (an MSE with no ratings) is averaged
        # over the batches that do.
        sums, counts = {}, {}
        self.model.train()
        for epoch in range(1, s.epochs + 1):
            for group in self._groups():
                if self.step >= self.total:
                    break
                parallel.check_stop(self.run.stop)
                for batch in group:
                    if not parallel.distributed():  # across processes the stop is agreed once a step
                        self.run.stop.check()
                    # Across several GPUs each process takes its share of the batch.
                    part = parallel.share(batch)
                    if not part:
                        continue
                    loss, extra = self.compute(part)
                    if not torch.isfinite(loss):
                        raise TrainerError(
                            f"the loss became {loss.item()} at step {self.global_step + 1}; "
                            "try a lower learning_rate")
                    (loss * (len(part) / len(batch)) / len(group)).backward()
                    for name, value in {"loss": loss.item(), **extra}.items():
                        sums[name] = sums.get(name, 0.0) + value
                        counts[name] = counts.get(name, 0) + 1
                parallel.sum_gradients(params)
                norm = grad_norm(params, s.max_grad_norm)
                sums["grad_norm"] = sums.get("grad_norm", 0.0) + norm
                counts["grad_norm"] = counts.get("grad_norm", 0) + 1
                lr = schedule.get_last_lr()[0]
                optimizer.step()
                schedule.step()
                optimizer.zero_grad(set_to_none=True)
                self.step += 1
                self.run.emitter.progress("training", step=self.global_step,
                                          total_steps=self.step_offset + self.total, epoch=epoch, iter=self.iter)
                if self.step % s.logging_steps == 0 or self.step == self.total:
                    averages = {name: sums[name] / counts[name] for name in sums}
                    self.run.emitter.metric({"step": self.global_step, "epoch": epoch, "iter": self.iter,
                                             **averages, "lr": lr})
                    sums, counts = {}, {}
                if s.save_steps and self.step % s.save_steps == 0 and self.checkpoint:
                    self.checkpoint(f"step_{self.global_step}")
            if self.evaluate is not None:
                self._evaluate(epoch)
            if self.stopped or self.step >= self.total:
                break
        self._keep_best(epoch)
        return self.step

    def _evaluate(self, epoch):
        self.run.emitter.progress("evaluating", step=self.global_step, epoch=epoch, iter=self.iter)
        self.model.eval()
        with torch.no_grad():
            values = self.evaluate()
        self.model.train()
        if values:
            self.run.emitter.metric({"step": self.global_step, "epoch": epoch, "iter": self.iter, **values},
                                    phase="evaluating")
        if not self.keep_best:
            return
        improved, reason = self.early.record(epoch, (values or {}).get("eval_loss"))
        if improved:
            self.best_weights = snapshot(self.model)
            self.best_epoch, self.best_step = epoch, self.global_step
        if reason:
            self.stopped = reason
            self.run.emitter.stop(reason, step=self.global_step, epoch=epoch)

    def _keep_best(self, last_epoch):
        """Put back the best epoch's weights when a later one was worse."""
        if self.best_weights is None:
            return
        if self.best_epoch != last_epoch or self.stopped:
            restore(self.model, self.best_weights)
            log.info("kept the weights of epoch %d (eval_loss %.4g)", self.best_epoch, self.early.best)
        self.run.emitter.metric({"step": self.global_step, "best_epoch": self.best_epoch,
                                 "best_step": self.best_step, "best_eval_loss": self.early.best},
                                phase="evaluating")
        self.best_weights = None

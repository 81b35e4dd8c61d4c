"""Learning-rate schedules as plain functions of the step, so they can be
checked by hand and handed to torch's LambdaLR."""

import math


def lr_factor(step, warmup_steps, total_steps, kind):
    """Multiplier of the base learning rate before optimizer step `step`
    (0-based): a linear warmup from 0 over warmup_steps, then constant,
    linear decay to 0, or cosine decay to 0 at total_steps."""
    if warmup_steps > 0 and step < warmup_steps:
        return (step + 1) / warmup_steps
    if kind == "constant":
        return 1.0
    decay_steps = max(1, total_steps - warmup_steps)
    progress = min(1.0, (step - warmup_steps) / decay_steps)
    if kind == "linear":
        return 1.0 - progress
    if kind == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    raise ValueError(f"unknown schedule {kind!r}")

"""The rules that end a run early, as plain bookkeeping on numbers so that
they are tested without torch. Each answers None to go on, or the reason
to stop as a sentence the job page shows.

- EarlyStopping: validation loss that has not improved for `patience`
  evaluations in a row (improving means falling below the best by more
  than `threshold`).
- KLBound: the policy's KL divergence from the reference above a bound.
- RewardHacking: the training reward still rising while the held-out score
  falls away from its best, `patience` checks in a row.
"""

import math


def _g(x):
    return f"{x:.4g}"


class EarlyStopping:
    def __init__(self, patience, threshold=0.0):
        self.patience = patience
        self.threshold = threshold
        self.best = None
        self.best_epoch = None
        self.bad = 0

    def record(self, epoch, value):
        """Record one evaluation's loss. Returns (improved, reason): improved
        is True when this is the new best; reason is set once `patience`
        evaluations in a row have not improved."""
        if value is None or not math.isfinite(value):
            return False, None
        if self.best is None or value < self.best - self.threshold:
            self.best, self.best_epoch, self.bad = value, epoch, 0
            return True, None
        self.bad += 1
        if self.patience and self.bad >= self.patience:
            return False, (f"validation loss has not improved for {self.bad} "
                           f"evaluation{'s' if self.bad != 1 else ''} (best {_g(self.best)} after epoch "
                           f"{self.best_epoch}, now {_g(value)}); the model from epoch {self.best_epoch} is kept")
        return False, None


class KLBound:
    def __init__(self, bound):
        self.bound = bound

    def check(self, step, kl):
        """kl is the mean per-token KL from the reference of the adapter
        after `step` updates, measured on its own samples."""
        if kl is not None and kl > self.bound:
            kept = f"the adapter from step {step - 1}" if step > 1 else "the starting adapter"
            return (f"KL divergence from the reference reached {_g(kl)} after step {step}, above the bound "
                    f"{_g(self.bound)}; {kept}, the last within it, is kept")
        return None


class RewardHacking:
    """Compares each held-out check with the best one so far.

    record(step, train_reward, heldout) takes the mean training reward of the
    steps since the last check and the held-out score now. A check is bad
    when the held-out score is below the best by more than `tolerance` while
    the training reward is above what it was at the best check."""

    def __init__(self, patience=2, tolerance=0.05):
        self.patience = patience
        self.tolerance = tolerance
        self.best = None  # (heldout, train_reward, step)
        self.bad = 0

    def start_reward(self, train_reward):
        """The training reward of the adapter that the first check measured,
        once known (the first step's samples come from it)."""
        if self.best is not None and self.best[1] is None:
            self.best = (self.best[0], train_reward, self.best[2])

    def record(self, step, train_reward, heldout):
        """Returns (improved, reason)."""
        if heldout is None or not math.isfinite(heldout):
            return False, None
        if self.best is None or heldout > self.best[0]:
            self.best, self.bad = (heldout, train_reward, step), 0
            return True, None
        best_heldout, best_train, best_step = self.best
        rising = train_reward is not None and best_train is not None and train_reward > best_train
        if rising and heldout < best_heldout - self.tolerance:
            self.bad += 1
        else:
            self.bad = 0
        if self.bad >= self.patience:
            return False, (f"reward hacking: the training reward rose from {_g(best_train)} to {_g(train_reward)} while the "
                           f"held-out score fell from {_g(best_heldout)} to {_g(heldout)} "
                           f"({self.bad} check{'s' if self.bad != 1 else ''} in a row); the adapter from step "
                           f"{best_step}, the best held-out score, is kept")
        return False, None

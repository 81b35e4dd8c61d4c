"""Proximal Policy Optimization with LoRA and a value head (Curate's seed
002): per-token rewards with a KL penalty against the adapter-free
reference, GAE over the value head's estimates, the clipped objective and
the clipped value loss. The loop is policy.py's, the update rl.py's."""

from .policy import train  # noqa: F401

"""Group Relative Policy Optimization with LoRA: for each prompt a group of
sampled replies, advantages normalised within the group, the clipped
objective and a KL penalty against the adapter-free reference. The loop is
policy.py's, the update rl.py's."""

from .policy import train  # noqa: F401

"""Curate's local training program.

Run as ``python -m curate_trainer run CONFIG_JSON`` or ``python -m curate_trainer probe``.
The protocol, configuration, data and scoring modules use only the standard
library; the training methods import torch, transformers and peft when they run.
"""

__version__ = "0.1.0"

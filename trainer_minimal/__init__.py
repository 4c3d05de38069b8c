"""trainer_minimal: a compact PyTorch RL trainer for verifiable tasks that logs compute-scaling curves.

Files, in reading order: config (dataclass, presets), tokenizer, tasks, model, rollout, losses,
flops, logging_io, train (the loop), sweep, cli. Start with train.py's docstring.
"""

from .config import PRESETS, Config, make_config

__all__ = ["Config", "PRESETS", "make_config"]

"""Export captured LLM calls as datasets for other trainers (SFT, RL, preference pairs); `agl export` runs it.

The store is streamed (pages of rollouts, one rollout's spans at a time), so memory does not grow with its size.
See docs/export.md.
"""

from .records import ExportedRollout, chat_messages, rl_records, sft_records
from .run import ExportOptions, ExportSummary, export_store
from .writers import Format, Kind, open_writer

__all__ = [
    "ExportOptions",
    "ExportSummary",
    "ExportedRollout",
    "Format",
    "Kind",
    "chat_messages",
    "export_store",
    "open_writer",
    "rl_records",
    "sft_records",
]

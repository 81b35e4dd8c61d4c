"""Cooperative cancellation: SIGTERM or SIGINT sets a flag that the training
loops check between steps, so a cancelled run can still save a checkpoint.
A second signal ends the process at once."""

import os
import signal

from .errors import Cancelled

CANCELLED_EXIT_CODE = 143  # 128 + SIGTERM, what a shell reports for a terminated process


class StopFlag:
    def __init__(self):
        self.signals = 0

    @property
    def requested(self):
        return self.signals > 0

    def _handle(self, signum, frame):
        self.signals += 1
        if self.signals > 1:
            os._exit(CANCELLED_EXIT_CODE)

    def install(self):
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)
        return self

    def check(self):
        """Raise Cancelled once a stop has been asked for."""
        if self.requested:
            raise Cancelled()

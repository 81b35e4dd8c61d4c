"""Errors that end a run with a message the caller can act on."""


class TrainerError(Exception):
    """A failure whose message is shown to the user as the run's error event."""


class ConfigError(TrainerError):
    """One or more invalid fields in config.json; each problem names its field."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("invalid config: " + "; ".join(self.problems))


class DataError(TrainerError):
    """Invalid lines in a data file; each problem names its line."""

    def __init__(self, path, problems, more=0):
        self.path = str(path)
        self.problems = list(problems)
        text = "; ".join(self.problems)
        if more:
            text += f"; and {more} more"
        super().__init__(f"{self.path}: {text}")


class Cancelled(Exception):
    """Raised between steps once SIGTERM or SIGINT has been received."""

"""The errors pipefeed raises."""


class PipeError(RuntimeError):
    """An error from pipe, in pipe's own words: a malformed .pipe file
    (with its file:line:col), a corrupt record under on_error=fail, …; or
    a state_dict of a format this pipefeed does not read."""


class PipeDied(PipeError):
    """pipe exited (or was killed) while the loader needed it; the message
    carries its exit status and its last lines on stderr."""

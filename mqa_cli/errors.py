"""One exception type for bad input: the CLI turns it into one line on stderr and exit code 2."""


class UserError(ValueError):
    """Bad input from the user (flags, files, tensors): reported in one line, exit code 2."""

"""The command line's exit codes, for every command."""

EXIT_OK = 0
EXIT_FAILURE = 1  # the work failed (a part unreachable, a stage unavailable)
EXIT_BAD_INPUT = 2  # the input or a setting is wrong: the message names it

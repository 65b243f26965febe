"""Subcommands of the ``collabcausal`` CLI, one module each (see :mod:`collabcausal.cli`)."""

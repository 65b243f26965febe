"""The ``collabcausal`` command.

Each subcommand lives in :mod:`collabcausal.commands` as a module with ``register(subparsers)``
that adds its parser and sets ``func`` (``func(args) -> int``). Only the module of the command
being run is imported: ``collabcausal --help`` and ``--version`` list the commands from
:data:`COMMANDS` without importing numpy, gRPC or the estimators, so they answer at once.

Errors derived from :class:`~collabcausal.errors.CollabCausalError` are printed as one line on
stderr and turned into the class's exit code (table in :mod:`collabcausal.errors`). Progress goes
to stderr through :mod:`logging` (:mod:`collabcausal.logs`); ``-v`` adds detail, ``-q`` keeps
warnings and errors only. A closed output pipe (``collabcausal ... --json | head``) ends the
command quietly with exit code 141.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import re
import sys
from collections.abc import Sequence

from collabcausal import __version__
from collabcausal.errors import CollabCausalError
from collabcausal.logs import configure_logging

# name -> one-line summary shown by `collabcausal --help` (the command's own --help has details)
COMMANDS: dict[str, str] = {
    "simulate": "split a data set into a grid of parties and compare DC-QE settings (paper 003)",
    "party": "run a party node (data holder): join a study, show the privacy budget",
    "certs": "make the study CA and the certificates of parties and analyst",
    "analyst": "run the analyst node (study coordinator)",
    "discover": "private cause-effect direction between two columns (additive noise model, paper 002)",
}

EPILOG = """\
examples:
  collabcausal simulate --dataset lalonde --bootstrap 200 --out results
  collabcausal certs init --dir certs
  collabcausal party join --config party.toml
  collabcausal analyst serve --study study.toml
  collabcausal SUBCOMMAND --help      (options and examples of one command)
"""

BROKEN_PIPE_EXIT = 141  # 128 + SIGPIPE, what a C program killed by a closed pipe reports
# gRPC's C core logs to stderr on its own (e.g. `E... add_port.cc:83] Failed to add port` before the
# one-line error of a port in use); the CLI reports every failure itself. Read when grpc is first
# imported, which the command modules do inside run(); GRPC_VERBOSITY=ERROR in the environment
# brings the core's log back for debugging.
GRPC_VERBOSITY = "NONE"


NEGATIVE_LIST = re.compile(r"-\d[^,]*(,[^,]+)+")
"""A comma-separated list whose first item is a negative number: ``-2,8``, ``-1e3,5``."""


def joined_negative_lists(words: list[str]) -> list[str]:
    """``--option -2,8`` as ``--option=-2,8`` (:class:`Parser`); every other word as it is, and none after ``--``."""
    out: list[str] = []
    for i, word in enumerate(words):
        if word == "--":
            return out + words[i:]
        if out and out[-1].startswith("--") and "=" not in out[-1] and NEGATIVE_LIST.fullmatch(word):
            out[-1] = f"{out[-1]}={word}"
        else:
            out.append(word)
    return out


class Parser(argparse.ArgumentParser):
    """argparse's parser, naming a misspelt long option in one line ("did you mean --settings?").

    Plain argparse sets an unknown option aside and lets the next positional take its value, so
    ``simulate --setings W,CA`` failed after the whole usage with ``argument kind: invalid
    choice: 'W,CA'``. Every parser checks the long options it is given before parsing them: up to
    its first subcommand word, whose own parser checks the rest (``add_subparsers`` makes the
    subcommand parsers of this class too). A unique prefix of an option is accepted, as argparse
    accepts it; words after ``--`` are values.

    A value list that starts with a negative number (``--outcome-range -2,8``, study.toml's ``[-2, 8]``)
    is the option's value: argparse would read ``-2,8`` as an unknown option, since only a plain number
    like ``-2`` passes as a value.
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Refuse an unknown long option (exit 2, one line), then parse as argparse does."""
        words = joined_negative_lists(list(sys.argv[1:] if args is None else args))
        self._refuse_unknown_option(words)
        return super().parse_known_args(words, namespace)

    def _refuse_unknown_option(self, words: list[str]) -> None:
        commands = {name for a in self._actions if isinstance(a, argparse._SubParsersAction) for name in a.choices}
        known = [s for a in self._actions for s in a.option_strings if s.startswith("--")]
        for word in words:
            if word == "--" or word in commands:
                return
            name = word.split("=", 1)[0]
            if not name.startswith("--") or any(option.startswith(name) for option in known):
                continue
            close = difflib.get_close_matches(name, known, n=1)
            fix = f"did you mean {close[0]}?" if close else f"`{self.prog} --help` lists its options"
            self.exit(2, f"collabcausal: error: unknown option {name} of `{self.prog}`; fix: {fix}\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser; only ``command``'s module (if any) is imported and registered.

    The other commands get a placeholder parser carrying their summary, enough for the
    top-level ``--help`` listing.
    """
    parser = Parser(
        prog="collabcausal",
        description="Privacy-preserving causal inference across institutions.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"collabcausal {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more progress detail on stderr (repeatable)"
    )
    parser.add_argument(
        "-q", "--quiet", dest="log_quiet", action="store_true", help="no progress on stderr, only warnings and errors"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, summary in COMMANDS.items():
        if name == command:
            importlib.import_module(f"collabcausal.commands.{name}").register(subparsers)
        else:
            subparsers.add_parser(name, help=summary)
    return parser


def command_in(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the first known command word), or None."""
    return next((word for word in argv if word in COMMANDS), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("GRPC_VERBOSITY", GRPC_VERBOSITY)
    try:
        try:
            args = build_parser(command_in(argv)).parse_args(argv)
        except SystemExit as exc:  # --help, --version and usage errors
            sys.stdout.flush()
            return exc.code if isinstance(exc.code, int) else 2
        configure_logging(-1 if args.log_quiet else args.verbose)
        try:
            code = int(args.func(args) or 0)
        except CollabCausalError as exc:
            print(f"collabcausal: error: {exc}", file=sys.stderr)
            return exc.exit_code
        except KeyboardInterrupt:
            print("collabcausal: interrupted", file=sys.stderr)
            return 130
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly; point stdout at /dev/null so the
        # interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_EXIT


if __name__ == "__main__":
    sys.exit(main())

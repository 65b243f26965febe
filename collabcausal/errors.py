"""The project's exception hierarchy.

Every error a user can cause derives from :class:`CollabCausalError` and carries two parts: the
problem and the fix. ``str(error)`` joins them on one line, which is what the CLI prints before
exiting with the class's ``exit_code``.

Exit codes (documented in docs/cli.md):

====  ==========================  ==========================================================
code  class                       meaning
====  ==========================  ==========================================================
1     CollabCausalError           any other project error
2     InputError                  bad data, bad arguments, bad file (user input)
3     ConfigError                 a study.toml / party.toml that cannot be used
4     PolicyError                 the party's policy forbids the request
5     BudgetExceededError         the privacy budget would be exceeded
6     ProtocolError               malformed, truncated, oversized or unexpected messages
7     IdentityError               certificates, TLS, roster
8     NumericalError              rank deficiency, non-convergence
9     StudyFailedError            a study could not complete (deadline, missing party)
10    NoAnswerError               a mechanism declined to answer (propose-test-release)
11    DataSourceError             a party's database cannot be read: unreachable, login refused,
                                  SQL error, a query that writes, a statement timeout
====  ==========================  ==========================================================
"""

from __future__ import annotations


class CollabCausalError(Exception):
    """Base class of every collabcausal error.

    Parameters
    ----------
    problem : str
        What is wrong, naming the offending file, column, party or value.
    fix : str, optional
        What the user should do about it.
    """

    exit_code = 1

    def __init__(self, problem: str, fix: str | None = None) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(problem if fix is None else f"{problem}; fix: {fix}")


class InputError(CollabCausalError, ValueError):
    """Bad user input: a file, a column, an array, an argument."""

    exit_code = 2


class ConfigError(CollabCausalError, ValueError):
    """A configuration file or section that cannot be used."""

    exit_code = 3


class PolicyError(CollabCausalError, PermissionError):
    """A request that the party's policy does not allow."""

    exit_code = 4


class BudgetExceededError(PolicyError):
    """A request whose privacy cost would exceed the remaining budget."""

    exit_code = 5


class ProtocolError(CollabCausalError):
    """A malformed, truncated, oversized or unexpected message."""

    exit_code = 6


class IdentityError(CollabCausalError):
    """A certificate, TLS or roster problem."""

    exit_code = 7


class NumericalError(CollabCausalError, ArithmeticError):
    """A numerical failure: rank deficiency, non-convergence, degenerate input."""

    exit_code = 8


class StudyFailedError(CollabCausalError):
    """A study that could not complete (missed deadline, party lost)."""

    exit_code = 9


class NoAnswerError(CollabCausalError):
    """A mechanism that declined to answer (e.g. propose-test-release refused)."""

    exit_code = 10


class DataSourceError(CollabCausalError):
    """A party's ``[data]`` database that cannot be read (unreachable, login refused, SQL error, timeout)."""

    exit_code = 11

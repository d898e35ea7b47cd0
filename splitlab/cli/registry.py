"""How subcommands register: each is one function ``fn(args) -> (data, lines)`` added with :func:`command`.

``data`` is a JSON-ready dict (printed as one JSON object with ``--json``, which every subcommand gets) and
``lines`` the human-readable output. Subcommand modules import this module; this module imports none of them.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Callable

__all__ = ["COMMANDS", "command", "arg", "CLIError", "Parser", "one_line", "stage_printer"]

#: name -> (function, one-line help, argument specs); filled by :func:`command`.
COMMANDS: dict[str, tuple[Callable, str, tuple]] = {}


class CLIError(Exception):
    """A usage error found after parsing; printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but an error is one line on stderr (no usage block), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")


def arg(*flags: str, **kwargs) -> tuple:
    """An argument spec for :func:`command`: the same arguments as ``ArgumentParser.add_argument``."""
    return flags, kwargs


def command(name: str, help: str, *arguments: tuple) -> Callable:
    """Register ``fn(args) -> (data: dict, lines: list[str])`` as the subcommand ``name``."""
    def register(fn: Callable) -> Callable:
        COMMANDS[name] = (fn, help, arguments)
        return fn
    return register


def one_line(message: object) -> str:
    text = " ".join(str(message).split())
    return text if len(text) <= 1000 else text[:997] + "..."


def stage_printer(name: str) -> Callable[[str], None]:
    """A function printing one line per stage of a long run on stderr, ``splitlab NAME [12.3 s]: LINE`` (the time
    since this call), so that a run of tens of seconds is not silent; stdout keeps only the result."""
    t0 = time.time()

    def say(line: str) -> None:
        print(f"splitlab {name} [{time.time() - t0:.1f} s]: {line}", file=sys.stderr, flush=True)
    return say

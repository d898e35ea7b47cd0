"""``python -m splitlab SUBCOMMAND`` (or the ``splitlab`` console script).

Each subcommand lives in its own module and registers itself with :func:`.registry.command`; argument checks live
in :mod:`.args`. Exit status: 0 ok; 2 for usage errors (argparse, or a :class:`~.registry.CLIError` found after
parsing); 1 for errors at run time (``ModelLoadError``, ``ContextLengthError``, ``EmptyPromptError``,
``CacheMismatchError`` and other ``ValueError``/``RuntimeError``/``OSError``); 130 interrupted; 141 the reader of
stdout went away.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from . import demo, kv_size, serving, transfer  # noqa: F401  (each registers its subcommand)
from .registry import COMMANDS, CLIError, Parser, one_line

__all__ = ["main", "build_parser", "COMMANDS"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="splitlab", description="See, measure and teach the prefill/decode split.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (fn, help_text, arguments) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        for flags, kwargs in arguments:
            p.add_argument(*flags, **kwargs)
        p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
        p.set_defaults(run=fn)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 error, 2 usage error, 130 interrupted, 141 the
    reader of stdout went away, as in ``splitlab kv-size tiny | head -1``)."""
    args = build_parser().parse_args(argv)
    try:
        data, lines = args.run(args)
    except CLIError as err:
        print(f"splitlab {args.command}: error: {one_line(err)}", file=sys.stderr)
        return 2
    except (ValueError, RuntimeError, OSError) as err:  # splitlab's errors subclass ValueError / RuntimeError
        print(f"splitlab {args.command}: error: {one_line(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"splitlab {args.command}: interrupted", file=sys.stderr)
        return 130
    try:
        print(json.dumps(data) if args.json else "\n".join(lines))
        sys.stdout.flush()
    except BrokenPipeError:  # the reader closed the pipe: no traceback, and none when Python flushes at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return 0

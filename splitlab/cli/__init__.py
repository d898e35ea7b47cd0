"""``python -m splitlab SUBCOMMAND`` (or the ``splitlab`` console script).

Each subcommand lives in its own module and registers itself with :func:`.registry.command`; argument checks live
in :mod:`.args`. Exit status, the same for every subcommand:

- 0: done;
- 2: the command line itself is wrong: a value argparse refuses (not a number, an unknown choice, a device
  splitlab does not run on), or options that contradict each other (a :class:`~.registry.CLIError`);
- 1: the command line is fine but what it names cannot be used or the run fails: a file that does not exist or
  holds no config, a model that cannot be loaded, a device this machine does not have, a worker that dies
  (``ModelLoadError``, ``ContextLengthError``, ``CacheMismatchError`` and other ``ValueError``/``RuntimeError``/
  ``OSError``; running out of memory);
- 3: ``serve``, ``compare`` or ``simulate`` ran to the end and printed their results, but requests failed (a
  worker lost with nobody left to take its requests, a cache that could not be moved) or every request was
  rejected (nothing served: a KV budget too small for any request, say; the text says so in capitals); some
  rejected requests alone do not count;
- 130 interrupted (worker processes are stopped first); 141 the reader of stdout went away.

Subcommands that run a model say how many CPU threads torch ran and why (``--threads N`` to set them); those that
can run long draw a progress bar on stderr when it is a terminal, never with ``--json``
(:mod:`splitlab.common.progress`).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

# each registers its subcommand
from . import calibrate, demo, kv_size, map, plan, serving, simulate, transfer  # noqa: F401
from .registry import COMMANDS, CLIError, Parser, one_line

__all__ = ["main", "build_parser", "COMMANDS"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="splitlab", description="See, measure and teach the prefill/decode split.",
                    epilog="exit status: 0 done, 1 the run failed, 2 a usage error, 3 serve/compare/simulate "
                           "finished but requests failed or all were rejected (results printed), 130 interrupted")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (fn, help_text, arguments) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        for flags, kwargs in arguments:
            p.add_argument(*flags, **kwargs)
        p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
        p.set_defaults(run=fn)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 error, 2 usage error, 3 requests failed, or every
    one rejected, in a serve/compare/simulate run whose results were printed, 130 interrupted, 141 the reader of stdout
    went away, as in ``splitlab kv-size tiny | head -1``; 1 too when the output cannot be written, a full disk)."""
    args = build_parser().parse_args(argv)
    try:
        done = args.run(args)
    except CLIError as err:
        print(f"splitlab {args.command}: error: {one_line(err)}", file=sys.stderr)
        return 2
    except (ValueError, RuntimeError, OSError) as err:  # splitlab's errors subclass ValueError / RuntimeError
        print(f"splitlab {args.command}: error: {one_line(err)}", file=sys.stderr)
        return 1
    except MemoryError as err:  # numpy's ArrayMemoryError says how much it asked for
        print(f"splitlab {args.command}: error: out of memory: {one_line(err) or 'ask for less'}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"splitlab {args.command}: interrupted", file=sys.stderr)
        return 130
    if done is None:  # a worker rank under torchrun: the router (rank 0) reports
        return 0
    data, lines, *status = done  # a command may add its exit status (serving runs: 3, requests failed or none served)
    try:
        print(json.dumps(data) if args.json else "\n".join(lines))
        sys.stdout.flush()
    except BrokenPipeError:  # the reader closed the pipe: no traceback, and none when Python flushes at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as err:  # a full disk behind `> file` (ENOSPC) was a traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        print(f"splitlab {args.command}: error: cannot write the output: {one_line(err)}", file=sys.stderr)
        return 1
    return status[0] if status else 0

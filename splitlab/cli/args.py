"""Argument checks and formatting shared by every subcommand: each type refuses bad text with a one-line
reason (argparse turns it into a usage error, exit status 2); :func:`check_chunking` and its like check options
against each other after parsing (a :class:`~.registry.CLIError`, also exit status 2)."""
from __future__ import annotations

import argparse
import math
import sys

__all__ = ["positive_int", "request_count", "thread_count", "seed_int", "positive_float", "slo_seconds", "link_gbps",
           "list_items", "token_list", "chunk_list", "device_name", "kv_dtype", "weight_dtype", "check_chunking",
           "check_chunk_list", "check_torchrun", "human_bytes", "number", "gamma_cv", "THREADS", "MEMORY_UTILIZATION",
           "memory_share", "progress", "threads_fields", "timeout_seconds", "check_kv_room"]


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def request_count(text: str) -> int:
    """A ``--requests`` value: an integer in 1 .. :data:`splitlab.serving.workload.MAX_REQUESTS` (the CLI sends at
    least one; the workload API also takes 0)."""
    from ..serving.workload import MAX_REQUESTS
    value = positive_int(text)
    if value > MAX_REQUESTS:
        raise argparse.ArgumentTypeError(f"must be an integer in 1 .. {MAX_REQUESTS:,} (a workload holds at most "
                                         f"{MAX_REQUESTS:,} requests: their prompts are built in memory), got "
                                         f"{value:,}")
    return value


def thread_count(text: str) -> int:
    """A ``--threads`` value: an integer in 1 .. this machine's CPU count (:func:`splitlab.common.threads.max_threads`;
    torch took 100000 and segfaulted)."""
    from ..common.threads import check_threads, max_threads
    value = positive_int(text)
    try:
        return check_threads(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer in 1 .. {max_threads()} (this machine's CPU count), "
                                         f"got {value}") from None


#: ``--threads`` of every subcommand that runs a model on the CPU (:func:`splitlab.load_model`'s ``threads``)
THREADS = (("--threads",), dict(type=thread_count, default=None, metavar="N",
                                help="CPU threads for torch (default: OMP_NUM_THREADS if set, else splitlab's choice: "
                                     "1 for the tiny presets, else the idle CPUs; the output says which)"))


def progress(args) -> bool:
    """The ``progress`` a subcommand passes on: no bar with ``--json``, else a bar when stderr is a terminal
    (:func:`splitlab.common.progress.show_progress`), resolved here to True or False."""
    from ..common.progress import show_progress
    return False if args.json else show_progress(None)


def threads_fields(lm) -> dict:
    """``cpu_threads`` and ``cpu_threads_note`` of a loaded model (the JSON and text of every command that runs
    one): how many CPU threads torch ran and who chose them."""
    return dict(cpu_threads=lm.threads, cpu_threads_note=lm.threads_note)


def seed_int(text: str) -> int:
    """A seed for numpy and torch alike: an integer in 0 .. 2**63 - 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value < 2 ** 63:
        raise argparse.ArgumentTypeError(f"must be an integer in 0 .. 2**63 - 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite positive number, got {text}")
    return value


def gamma_cv(text: str) -> float:
    """A ``--cv`` of gamma arrivals: a number in [0.001, 100], the range
    :func:`splitlab.serving.workload.gamma_arrivals` draws (below, the gaps are even; above, a run is one or two
    bursts and misses its rate)."""
    value = positive_float(text)
    if not 1e-3 <= value <= 100:
        raise argparse.ArgumentTypeError(f"must be a coefficient of variation in 0.001 .. 100 (1: Poisson, above: "
                                         f"bursty), got {text}")
    return value


def memory_share(text: str) -> float:
    """A share of a device's memory: a number in (0, 1] (vLLM's gpu_memory_utilization)."""
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"must be a share of the device's memory in (0, 1], got {text}")
    return value


#: the share of a device's memory a worker uses (serve, compare, simulate, plan): ServingConfig.memory_utilization
MEMORY_UTILIZATION = (("--memory-utilization",), dict(
    type=memory_share, default=0.9, metavar="SHARE",
    help="share of a device's memory a worker uses for weights, activations and KV cache, in (0, 1] (like "
         "vLLM's --gpu-memory-utilization; default 0.9)"))


def timeout_seconds(text: str) -> float:
    """A ``--timeout`` between processes: seconds > 0, at most a week (:func:`splitlab.common.timeouts.check_timeout`;
    1e14 overflowed deep inside torch.distributed)."""
    from ..common.timeouts import check_timeout
    value = positive_float(text)
    try:
        return check_timeout(value, "the timeout")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).replace("the timeout must be", "must be")) from None


#: the longest SLO the command line takes (s): about 30,000 years, no limit in practice; a goodput search's runs
#: span 20 request lifetimes (TTFT SLO + (mean output - 1) x TPOT SLO) of simulated arrivals, which overflowed at
#: 1e308
MAX_SLO_S = 1e12


def slo_seconds(text: str) -> float:
    """An SLO: a finite number of seconds > 0 and at most :data:`MAX_SLO_S`."""
    value = positive_float(text)
    if value > MAX_SLO_S:
        raise argparse.ArgumentTypeError(f"must be a time in seconds > 0 and <= {MAX_SLO_S:g} (30,000 years: no "
                                         f"limit in practice), got {text}")
    return value


def link_gbps(text: str) -> float:
    """A link speed in GB/s: a finite number > 0 whose bytes/s (x 1e9) is finite too (1e308 GB/s was inf bytes/s)."""
    value = positive_float(text)
    if not math.isfinite(value * 1e9):
        raise argparse.ArgumentTypeError(f"must be a finite number of GB/s > 0 (at most {_MAX_GBPS:.3g}), got {text}")
    return value


_MAX_GBPS = sys.float_info.max / 1e9  # the largest float of bytes/s


def device_name(text: str) -> str:
    """A device splitlab runs models on: cpu, cuda, cuda:N or mps (whether this machine has it is checked when
    the model loads: a run-time failure). Others, such as "meta" (tensors without data), are refused here."""
    kind, _, index = text.partition(":")
    if kind not in ("cpu", "cuda", "mps") or (index and not (kind == "cuda" and index.isdigit())):
        raise argparse.ArgumentTypeError(f"{text!r} is not a device splitlab runs models on: use cpu, cuda, cuda:N "
                                         "or mps")
    return text


def kv_dtype(text: str) -> str:
    """A KV element type by name (fp16, bf16, fp8, int8, int4, ...), kept as written."""
    from ..common.dtypes import canonical
    try:
        canonical(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def weight_dtype(text: str) -> str:
    """A dtype model weights can be loaded in (float32, float16, bfloat16 and their short names)."""
    from ..common.dtypes import WEIGHT_DTYPES, canonical
    try:
        canonical(text, WEIGHT_DTYPES)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def check_chunking(args) -> None:
    """The chunked policy's budget must leave room for prompts beside a full decode batch."""
    from .registry import CLIError
    if args.policy == "chunked" and args.max_batch is not None and args.chunk_tokens <= args.max_batch:
        raise CLIError(f"--chunk-tokens ({args.chunk_tokens}) must exceed --max-batch ({args.max_batch})")
    if args.policy == "chunked" and args.chunk_tokens < 2:
        raise CLIError(f"--chunk-tokens must be >= 2 (a decode token and a prompt token per step), got "
                       f"{args.chunk_tokens}")


def check_chunk_list(args) -> None:
    """Every fixed size of a search's ``--chunk-tokens`` (:func:`chunk_list`) must exceed ``--max-batch`` (or 1): a
    chunked step holds every decode row and at least one prompt token."""
    from .registry import CLIError
    if any(c != "tpot" and c <= (args.max_batch or 1) for c in args.chunk_tokens):
        raise CLIError("every --chunk-tokens must exceed " + (f"--max-batch ({args.max_batch})" if args.max_batch
                                                              else "1") + f", got {args.chunk_tokens}")


def check_torchrun(args) -> None:
    """``--torchrun`` joins the processes of the distributed back end, and nothing else."""
    from .registry import CLIError
    if args.torchrun and args.backend != "distributed":
        raise CLIError(f"--torchrun joins the processes of the distributed back end; --backend is {args.backend}")


def list_items(text: str) -> list[str]:
    """'1,2 4' -> ['1', '2', '4']: the items of a list option, split at commas and/or spaces.

    Raises:
        argparse.ArgumentTypeError: an empty item between two commas, or before or after one ('1,,2', ',1', '1,'):
            a typo that would otherwise drop a value without a word."""
    parts = [part.strip() for part in text.split(",")]
    if len(parts) > 1 and not all(parts):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty item (two commas in a row, or one at an end)")
    return " ".join(parts).split()


def token_list(text: str) -> list[int]:
    """'128,512 2048' -> [128, 512, 2048] (commas and/or separate arguments), each a positive integer."""
    out = [positive_int(part) for part in list_items(text)]
    if not out:
        raise argparse.ArgumentTypeError("give at least one number of tokens")
    return out


def chunk_list(text: str) -> list:
    """'256,tpot' -> [256, "tpot"]: chunk sizes (positive integers) and ``tpot``, the budget the TPOT SLO allows
    (:func:`splitlab.planning.chunk_budget.tpot_budget`)."""
    out = []
    for part in list_items(text):
        if part.lower() == "tpot":
            out.append("tpot")
        elif not part.lstrip("+-").isdigit():
            raise argparse.ArgumentTypeError(f"{part!r} is neither a chunk size (a positive integer) nor tpot")
        else:
            out.append(positive_int(part))
    if not out:
        raise argparse.ArgumentTypeError("give at least one number of tokens (a chunk size) or tpot")
    return out


def _count(text: str, what: str) -> int:
    """An integer >= 0 of ``what`` ("prompt tokens", "waiting requests")."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of {what} (an integer >= 0)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of {what} >= 0, got {value}")
    return value


def prompt_threshold(text: str) -> int | float:
    """A conditional split's prompt threshold (``--local-prefill-tokens``): tokens >= 0 (0: the plain split), or
    'inf' (every prefill on a decode worker)."""
    return math.inf if text.strip().lower() in ("inf", "infinity") else _count(text, "prompt tokens")


def queue_length(text: str) -> int:
    """A number of waiting requests >= 0 (``--local-prefill-queue``)."""
    return _count(text, "waiting requests")


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB' (binary units, up to EiB; 3 significant digits from 10,000 EiB on: a float's 22 digits
    of TiB were garbage)."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    for unit in units:
        if abs(n) < 1024 or unit == units[-1]:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}" if abs(n) < 1e4 else f"{n:.3g} {unit}"
        n /= 1024


def number(x: float) -> int | float:
    """An integral float as an int (for JSON and text: 2048.0 -> 2048)."""
    return int(x) if float(x).is_integer() else float(x)


def check_kv_room(executor, configs) -> None:
    """Each config's "auto" KV budget on ``executor`` has room for a cache, before any run (a worker with none
    would reject every request).

    Raises:
        CLIError: no room left for a KV cache at the config's --memory-utilization (every term of the sum)."""
    from .registry import CLIError
    for cfg in configs.values():
        if cfg.kv_budget_bytes == "auto":
            try:
                executor.auto_kv_budget(cfg.memory_utilization, cfg.forward_tokens)
            except ValueError as err:
                raise CLIError(f"--memory-utilization {cfg.memory_utilization:g}: {err}") from None

"""``python -m splitlab map``: where the split pays off. For a cluster of ``--workers``, one cell per prompt length
(across: its prefill cost in decode steps) and TPOT SLO (up: in lone decode steps), each with the winner in
goodput per worker among the best xPyD split, colocated prefill-first and colocated chunked
(:func:`splitlab.planning.split_map.split_map`), on the cost model of ``plan`` (``--cost FILE``, ``--gpu NAME
--model-config NAME``, or the built-in one). No model is loaded. JSON: the axes, the inputs, ``counts`` (cells won
by each layout) and ``cells`` (each: ``prompt_tokens``, ``prefill_steps``, ``tpot_steps``, its SLOs, ``winner``,
``tied``, ``winner_layout``, ``goodput_rps_per_worker``, ``binding_slo``, ``runner_up``,
``runner_up_goodput_rps_per_worker``, ``margin`` and every layout's goodput and binding SLO). ``--conditional
[Q ...]`` adds the conditional contender (each cell's best split with its decode workers prefilling when Q requests
wait at the prefill worker; Q = 1 and 2 by default): each cell's ``conditional`` and ``conditional_wins``, the cells
where it beats both the best pure split and the best colocated layout by more than the tie tolerance
(:func:`splitlab.planning.conditional_layouts.conditional_wins`)."""
from __future__ import annotations

from .args import (check_chunk_list, chunk_list, link_gbps, positive_float, positive_int, progress, queue_length,
                   seed_int)
from .costs import COST_OPTIONS, cost_model
from .registry import CLIError, arg, command
from .report import clean

__all__ = ["map_command"]

#: how a winner is written in a cell of the text map
SHORT = {"split": "split", "prefill-first": "pf-first", "chunked": "chunked", "tie": "tie", "none": "none"}
LETTER = {"split": "S", "prefill-first": "P", "chunked": "C"}


def _cell(c) -> str:
    """A cell of the text map: '2P+2D +53%', 'chunked x4' (the winner's lead: ``lead_text``), 'tie S=C' or 'none'."""
    from ..planning.map_result import lead_text
    if c.winner == "tie":
        return "tie " + "=".join(LETTER[k] for k in LETTER if k in c.tied)
    if c.winner == "none":
        return "none"
    return f"{c.names['split'] if c.winner == 'split' else SHORT[c.winner]} {lead_text(c.margin)}"


@command("map", "where the split pays off: the winning layout over prompt length and TPOT SLO, for a fixed cluster",
         arg("--workers", type=int, default=4, metavar="N", help="workers of the cluster, 2 to 16 (default 4)"),
         arg("--prompt-tokens", type=positive_int, nargs=2, default=None, metavar=("LOW", "HIGH"),
             help="range of prompt lengths, the columns (default 16 to the context less --output-tokens)"),
         arg("--columns", type=int, default=None, metavar="N",
             help="prompt lengths in the range (default range without --prompt-tokens), their prefill costs "
                  "geometric (default 6)"),
         arg("--tpot-steps", type=positive_float, nargs=2, default=None, metavar=("LOW", "HIGH"),
             help="range of the TPOT SLO in lone decode steps, >= 1, the rows (default 1.5, 2.5, 4, 8)"),
         arg("--rows", type=int, default=None, metavar="N",
             help="TPOT SLOs, geometric in the --tpot-steps range (default 4)"),
         arg("--output-tokens", type=positive_int, default=64, help="answer tokens of every request (default 64)"),
         arg("--link-gbps", type=link_gbps, default=None,
             help="the KV link between the pools in GB/s (default: the cost model's transfer)"),
         arg("--chunk-tokens", type=chunk_list, default=[256, "tpot"], metavar="LIST",
             help="chunk sizes of the chunked layout, the best counts; tpot: each cell's largest budget whose hybrid "
                  "step fits its TPOT SLO (default 256,tpot)"),
         arg("--tie-tolerance", type=positive_float, default=0.1,
             help="margins below this share of the winner's goodput are ties (default 0.1)"),
         arg("--max-batch", type=positive_int, default=None,
             help="a cap on the requests resident per worker (default: none, each worker's KV budget bounds them)"),
         arg("--seed", type=seed_int, default=0, help="seeds the request sets (default 0)"),
         arg("--conditional", type=queue_length, nargs="*", default=None, metavar="Q",
             help="add the conditional split: each cell's best split, its decode workers prefilling when Q requests "
                  "wait at the prefill worker (default Q: 1 2); lists the cells where it beats both pure layouts"),
         arg("--model", default=None, help="with --cost: the model you mean to map (checked against the file)"),
         *COST_OPTIONS)
def map_command(args):
    from ..planning.conditional_layouts import MAP_QUEUES, conditional_wins
    from ..planning.map_result import lead_text
    from ..planning.options import chunk_of
    from ..planning.split_map import MAP_EXTEND, geometric_axis, prompt_axis, split_map
    from ..serving import CostModelExecutor
    if not 2 <= args.workers <= 16:
        raise CLIError(f"--workers must be 2 to 16 (a split needs a prefill and a decode worker), got {args.workers}")
    for flag, n in (("--columns", args.columns), ("--rows", args.rows)):
        if n is not None and n < 1:
            raise CLIError(f"{flag} must be at least 1, got {n}")
    if args.rows is not None and args.tpot_steps is None:  # was ignored: the default rows are no geometric range
        raise CLIError("--rows needs --tpot-steps LOW HIGH (the default rows are 1.5, 2.5, 4 and 8 decode steps)")
    for flag, given, default, rng, same in (("--columns", args.columns, 6, args.prompt_tokens, "--prompt-tokens N N"),
                                            ("--rows", args.rows, 4, args.tpot_steps, "--tpot-steps N N")):
        n = given or default  # a range of one value with the default count was refused naming 'points'
        if given == 1 and (rng is None or rng[0] < rng[1]):
            got = "the default range" if rng is None else f"{rng[0]:g} to {rng[1]:g}"
            raise CLIError(f"{flag} 1 needs a range of one value, {same}, got {got}")
        if n is not None and n > 1 and rng is not None and rng[0] == rng[1]:  # was one column, or a value twice
            raise CLIError(f"{flag} {n} needs LOW below HIGH, got {rng[0]:g} to {rng[1]:g} (one value: {flag} 1)")
    check_chunk_list(args)
    if args.tie_tolerance >= 1:
        raise CLIError(f"--tie-tolerance must be below 1 (a share of the winner's goodput), got {args.tie_tolerance}")
    if args.output_tokens < 2:
        raise CLIError("--output-tokens must be at least 2 (one TPOT needs two tokens)")
    for flag, values in (("--prompt-tokens", args.prompt_tokens), ("--tpot-steps", args.tpot_steps)):
        if values is not None and values[0] > values[1]:
            raise CLIError(f"{flag}: an empty range, LOW {values[0]:g} is above HIGH {values[1]:g}")
    if args.tpot_steps is not None and args.tpot_steps[0] < 1:
        raise CLIError(f"--tpot-steps: a TPOT SLO below one lone decode step ({args.tpot_steps[0]:g}) no layout meets")
    queues = () if args.conditional is None else (args.conditional or MAP_QUEUES)
    if len(set(queues)) != len(queues):
        raise CLIError(f"--conditional holds a queue length twice: {list(queues)}")
    cost = cost_model(args, args.model)
    try:
        axes = {} if args.tpot_steps is None else {"--tpot-steps": geometric_axis(*args.tpot_steps, args.rows or 4)}
    except ValueError as err:  # named its own 'points', not the flags
        raise CLIError(f"--tpot-steps {args.tpot_steps[0]:g} {args.tpot_steps[1]:g} with --rows {args.rows or 4}: "
                       f"{err}") from None
    context = CostModelExecutor(cost).cost.max_context
    longest = args.prompt_tokens[1] if args.prompt_tokens else 16  # split_map's would name its own output_tokens
    if longest + args.output_tokens > context:
        what = (f"--prompt-tokens HIGH ({longest})" if args.prompt_tokens else
                "the default range's shortest prompt (16 tokens)") + f" and --output-tokens ({args.output_tokens})"
        raise CLIError(f"{what} exceed the cost model's context of {context} tokens: keep their sum at most "
                       f"{context}")
    if args.prompt_tokens is not None or args.columns is not None:  # --columns alone: the default range (split_map's)
        low, high = args.prompt_tokens or (16, max(16, context - args.output_tokens))
        axes["--prompt-tokens"] = prompt_axis(cost, low, high, args.columns or 6)
    kw = dict(tpot_steps=axes["--tpot-steps"]) if "--tpot-steps" in axes else {}
    m = split_map(cost, args.workers, axes.get("--prompt-tokens"), output_tokens=args.output_tokens,
                  link_bytes_per_s=args.link_gbps * 1e9 if args.link_gbps else None,
                  tie_tolerance=args.tie_tolerance, chunk_tokens=args.chunk_tokens, max_batch=args.max_batch,
                  seed=args.seed, progress=progress(args), conditional_queues=queues, **kw)
    link = (f"{args.link_gbps:g} GB/s (--link-gbps, in place of the cost model's"
            f"{' ' + args.link if getattr(args, 'link', None) else ''})" if args.link_gbps else
            "the cost model's transfer")
    text = [f"splitlab map: {args.workers} workers, {args.output_tokens}-token answers, TTFT SLO {m.ttft_prefills:g} "
            f"prefills of the prompt, KV link {link}",
            f"cost model: {m.cost_source}",
            f"decode batch: {m.batch_words}",
            f"winner in goodput per worker, its lead over the runner-up (ties: within {m.tie_tolerance:.0%} of the "
            f"winner); "
            f"{m.searches} goodput searches, " + (
                "plain runs that never go on (every layout alike)" if MAP_EXTEND == 1
                else f"runs going on to {MAP_EXTEND}x while unsettled (every layout alike)")]
    rows = {k: [_cell(c) for c in m.cells if c.tpot_steps == k] for k in m.tpot_steps}
    width = max(9, *(len(c) + 1 for r in rows.values() for c in r))
    text += [f"{'TPOT SLO':>14} | prefill cost in decode steps (prompt tokens)",
             f"{'(decode steps)':>14} | " + "".join(f"{s:>{width}.3g}" for s in m.prefill_steps),
             f"{'':>14} | " + "".join(f"{'(' + str(n) + ')':>{width}}" for n in m.prompt_tokens)]
    text += [f"{k:>14.3g} | " + "".join(f"{c:>{width}}" for c in rows[k])
             for k in reversed(m.tpot_steps)]  # loose SLOs on top, tight at the bottom
    if m.chunk_steps:  # of the first chunk size, a fixed one
        lo, hi = min(m.chunk_steps), max(m.chunk_steps)
        text.append(f"one step of a {m.chunk_tokens[0]}-token chunk beside a decode row: "
                    + (f"{lo:.3g}" if f"{lo:.2g}" == f"{hi:.2g}" else f"{lo:.3g} to {hi:.3g}") + " decode steps")
    budgets = sorted({chunk_of(c.names.get("chunked", "")) for c in m.cells} - {None})
    if "tpot" in m.chunk_tokens and budgets:  # the chunk sizes the cells' best chunked layouts ran at
        text.append(f"best chunked layout's chunk sizes over the cells ('tpot': each cell's TPOT budget): "
                    + ", ".join(map(str, budgets)) + " tokens")
    text += [f"note: {note}" for note in m.notes]
    counts = m.counts()
    text.append("cells won: " + ", ".join(f"{SHORT[w]} {n}" for w, n in counts.items() if n) +
                " (split: its best xPyD; pf-first: colocated prefill-first; chunked: colocated chunked; tie: S=split, "
                "P=pf-first, C=chunked)")
    data = m.to_json()
    if queues:
        wins = data["conditional_wins"] = conditional_wins(m)
        text.append(f"conditional split (local prefill when {' or '.join(map(str, queues))} requests wait) beats both "
                    f"pure layouts by more than {m.tie_tolerance:.0%} in {len(wins)} of {len(m.cells)} cells"
                    + (":" if wins else ""))
        text += [f"  {w['prompt_tokens']} tokens, TPOT {w['tpot_steps']:g} steps: {w['layout']} "
                 f"{w['goodput_rps_per_worker']:.3g} req/s per worker, {lead_text(w['margin_over_split'])} over the "
                 f"split, {lead_text(w['margin_over_colocated'])} over {w['colocated_layout']}" for w in wins]
    return clean(data), text

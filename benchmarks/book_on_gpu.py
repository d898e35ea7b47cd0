"""Every chapter of the book executed on this machine's GPU, as a Colab reader runs it (``load_model`` picks CUDA
when there is one), each chapter in its own kernel, several at a time: which chapters run whole, where one fails
(cell, error, the traceback's end), how long each took, and each cell's printed text for reading the GPU's numbers
afterwards.

    PYTHONPATH=. python benchmarks/book_on_gpu.py [--jobs 9] [--chapters 06 07] [--timeout 480] [--quick]
                                                [--allow-cpu]

Without CUDA it says so and exits 0 (skipped), unless ``--allow-cpu`` runs the chapters on the CPU. ``--quick``
(CI): only chapter 1's first code cells (imports, set-up, the model), so the kernel path and a chapter's set-up are
exercised in seconds. Writes ``$OUT/book_on_gpu.json`` (rewritten as each chapter ends, so a run cut short keeps
what finished) and ``$OUT/book_on_gpu_notebooks.tar.gz`` (the executed notebooks); ``$OUT`` defaults to /tmp.
Needs nbclient and ipykernel (the book's own requirements).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import io
import json
import os
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
TEXT_CHARS = 2000  # of each cell's printed text kept in the JSON


def _cell_text(cell) -> str:
    """What a code cell printed: its streams and the text/markdown or text/plain of its results, in order."""
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            parts.append(o.get("text", ""))
        elif o.get("output_type") in ("execute_result", "display_data"):
            data = o.get("data", {})
            parts.append(data.get("text/markdown") or data.get("text/plain") or "")
        elif o.get("output_type") == "error":
            parts.append(f"{o.get('ename')}: {o.get('evalue')}")
    text = "".join(p if isinstance(p, str) else "".join(p) for p in parts)
    return text[:TEXT_CHARS]


def run_chapter(path: str, timeout_s: int, quick: bool) -> tuple[dict, bytes]:
    """Execute one chapter notebook in a fresh kernel (cwd ``book/``); returns (its record, the executed notebook
    as JSON bytes). The record: ``chapter``, ``ok``, ``seconds``, ``error`` (the failing cell's index, ename,
    evalue, the traceback's last lines) and ``cells`` (index and printed text of each code cell that printed).
    Never raises on a failing cell: the failure is the record."""
    import nbformat
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    nb = nbformat.read(path, as_version=4)
    if quick:  # the first three code cells: imports, set-up, the model
        code = [c for c in nb.cells if c.cell_type == "code" and "NBVAL_SKIP" not in c.source][:3]
        nb.cells = code
    from splitlab.teach.kernel_wait import WakefulClient  # an explorer's cell cannot stall on a missed reply

    client = WakefulClient(nb, timeout=timeout_s, kernel_name="python3", resources={"metadata": {"path": str(BOOK)}})
    rec = {"chapter": Path(path).name, "ok": False, "error": None}
    t0 = time.perf_counter()
    try:
        client.execute()
        rec["ok"] = True
    except (CellExecutionError, CellTimeoutError) as e:
        failed = next((i for i, c in enumerate(nb.cells) if any(o.get("output_type") == "error"
                                                                 for o in c.get("outputs", []))), None)
        rec["error"] = {"cell": failed, "kind": type(e).__name__, "message": str(e)[-3000:]}
    except Exception as e:  # a kernel that died or would not start: the record says so
        rec["error"] = {"cell": None, "kind": type(e).__name__, "message": repr(e)[-3000:]}
    rec["seconds"] = round(time.perf_counter() - t0, 1)
    rec["cells"] = [{"index": i, "text": t} for i, c in enumerate(nb.cells)
                    if c.cell_type == "code" and (t := _cell_text(c))]
    return rec, nbformat.writes(nb).encode()


def _save(out_dir: Path, record: dict, notebooks: dict) -> None:
    """The JSON record and the tarball of executed notebooks, rewritten whole (a run cut short keeps both)."""
    (out_dir / "book_on_gpu.json").write_text(json.dumps(record, indent=1))
    with tarfile.open(out_dir / "book_on_gpu_notebooks.tar.gz", "w:gz") as tar:
        for name, data in sorted(notebooks.items()):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chapters", nargs="*", default=None, help="chapter numbers (06 07); default every chapter")
    p.add_argument("--jobs", type=int, default=1, help="chapters executed at a time, each in its own kernel")
    p.add_argument("--timeout", type=int, default=480, help="seconds one cell may run")
    p.add_argument("--quick", action="store_true", help="chapter 1's set-up cells only (CI)")
    p.add_argument("--allow-cpu", action="store_true", help="run on the CPU when there is no CUDA device")
    args = p.parse_args(argv)
    if args.jobs < 1 or args.timeout < 1:
        p.error(f"--jobs and --timeout must be >= 1, got {args.jobs} and {args.timeout}")
    if args.chapters is not None and not args.chapters:  # was every chapter: hours on a GPU
        p.error("--chapters needs at least one chapter number (leave it out for every chapter)")
    if args.quick and args.chapters:  # was ignored: chapter 1 alone ran
        p.error("--quick runs chapter 1's set-up alone: drop --chapters, or --quick")
    paths = sorted(str(f) for f in BOOK.glob("[0-9][0-9]_*.ipynb"))
    if args.quick:
        paths = paths[:1]
    elif args.chapters:
        wanted = {c.zfill(2) for c in args.chapters}
        unknown = wanted - {Path(f).name[:2] for f in paths}
        if unknown:
            p.error(f"no chapter {sorted(unknown)} in book/ (chapters: {[Path(f).name[:2] for f in paths]})")
        paths = [f for f in paths if Path(f).name[:2] in wanted]

    import torch
    if not torch.cuda.is_available() and not args.allow_cpu:
        print("book_on_gpu: skipped, no CUDA device (torch.cuda.is_available() is False; --allow-cpu runs the "
              "chapters on the CPU)")
        return 0
    import splitlab as sl
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    out_dir = Path(os.environ.get("OUT", "/tmp"))
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    record = {"what": "every chapter executed with nbclient, each in its own kernel, as a reader runs it",
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": sl.describe_device(dev), "torch": torch.__version__,
              "command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
              "jobs": args.jobs, "chapters": []}
    notebooks: dict = {}
    t0 = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        futures = {pool.submit(run_chapter, f, args.timeout, args.quick): f for f in paths}
        for fut in concurrent.futures.as_completed(futures):
            try:
                rec, data = fut.result()
            except Exception as e:  # its process died (a broken pool fails every chapter left): recorded, not lost
                rec, data = {"chapter": Path(futures[fut]).name, "ok": False, "seconds": None, "cells": [],
                             "error": {"cell": None, "kind": type(e).__name__, "message": repr(e)[-3000:]}}, b""
            record["chapters"].append(rec)
            record["chapters"].sort(key=lambda r: r["chapter"])
            record["wall_s"] = round(time.perf_counter() - t0, 1)
            if data:
                notebooks[rec["chapter"]] = data
            _save(out_dir, record, notebooks)
            where = "" if rec["ok"] else f" (cell {rec['error']['cell']}: {rec['error']['kind']})"
            took = "" if rec["seconds"] is None else f" in {rec['seconds']} s"
            print(f"{rec['chapter']}: {'ran whole' if rec['ok'] else 'FAILED'}{took}{where}", flush=True)
    failed = [r["chapter"] for r in record["chapters"] if not r["ok"]]
    print(f"{len(paths) - len(failed)} of {len(paths)} chapters ran whole on {record['device']} in "
          f"{record['wall_s']} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

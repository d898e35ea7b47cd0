"""The package's layout (docs/architecture.md): parts that only import the parts below them, no import cycles,
files of one idea (<= 300 lines), lines of at most 120 columns, and model-free parts that never import torch."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "splitlab"

#: part -> the parts it may import (the layering of docs/architecture.md)
ALLOWED = {
    "common": set(),
    "sizing": {"common"},
    "costmodel": {"common", "sizing"},
    "kvcache": {"common"},
    "phases": {"common", "sizing", "costmodel", "kvcache"},
    "transfer": {"common", "sizing", "kvcache", "phases"},
    "serving": {"common", "sizing", "costmodel", "kvcache", "phases", "transfer"},
    "planning": {"common", "sizing", "costmodel", "serving"},
    "teach": {"common", "sizing", "costmodel", "kvcache", "phases", "transfer", "serving", "planning"},
    "cli": {"common", "sizing", "costmodel", "kvcache", "phases", "transfer", "serving", "planning"},
}
FACADE = {"splitlab", "splitlab.__main__"}  # the re-exporting top-level modules may name anything


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """Absolute splitlab module names that ``from ... import ...`` reads."""
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not target.startswith("splitlab"):
        return []
    out = []
    for alias in node.names:  # "from pkg import submodule" reads the submodule
        sub = f"{target}.{alias.name}"
        path = ROOT / Path(*sub.split("."))
        out.append(sub if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file() else target)
    return out


def _imports() -> dict[str, set[str]]:
    graph = {}
    for path in PKG.rglob("*.py"):
        module = _module_name(path)
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):  # function-level imports count too
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("splitlab")}
            elif isinstance(node, ast.ImportFrom):
                found |= set(_resolve(module, path.name == "__init__.py", node))
        graph[module] = found - {module}
    return graph


def _part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ALLOWED else None


def test_every_part_is_known():
    parts = {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    assert parts <= set(ALLOWED), f"parts on disk {sorted(parts - set(ALLOWED))} are not in the layering"
    assert {p.stem for p in PKG.glob("*.py")} == {"__init__", "__main__"}, "modules belong in a part"


def test_no_upward_imports():
    bad = []
    for module, targets in _imports().items():
        if module in FACADE:
            continue
        here = _part(module)
        for t in targets:
            there = _part(t)
            if t in FACADE or (there != here and there not in ALLOWED[here]):
                bad.append(f"{module} imports {t}")
    assert not bad, "imports against the layering:\n" + "\n".join(sorted(bad))


def test_no_import_cycles():
    graph = _imports()
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_files_hold_one_idea():
    long = {str(p.relative_to(ROOT)): n for p in PKG.rglob("*.py") if (n := len(p.read_text().splitlines())) > 300}
    assert not long, f"files over 300 lines: {long}"


#: the widest line of the package and its tests (the house style; about 60 lines were wider until issue 22's audit)
MAX_COLUMNS = 120


def test_lines_fit_120_columns():
    files = [*PKG.rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    wide = [f"{p.relative_to(ROOT)}:{i}: {len(line)}" for p in files
            for i, line in enumerate(p.read_text().splitlines(), 1) if len(line) > MAX_COLUMNS]
    assert not wide, f"lines over {MAX_COLUMNS} columns:\n" + "\n".join(wide)


MODEL_FREE = """
import sys
import splitlab, splitlab.sizing, splitlab.costmodel
from splitlab import serving
from splitlab.cli import main
res = serving.run(serving.make_workload("chat", 20, 4.0), serving.ServingConfig.colocated(2))
assert len(res.completed) == 20
res = serving.run(serving.make_workload("chat", 20, 4.0), serving.ServingConfig.disaggregated(1, 2, trace=False))
assert len(res.completed) == 20
assert main(["kv-size", "Llama-3-8B", "--json"]) == 0
assert main(["serve", "--backend", "simulated", "--requests", "8", "--json"]) == 0
assert main(["simulate", "--requests", "30", "--rate", "8", "--layout", "disaggregated", "--json"]) == 0
assert main(["simulate", "--requests", "20", "--gpu", "H100", "--model-config", "Llama-3-8B", "--json"]) == 0
assert main(["plan", "--workload", "code", "--ttft-slo", "0.5", "--tpot-slo", "0.05", "--max-workers", "2",
             "--chunk-tokens", "64", "--json"]) == 0
heavy = sorted(m for m in ("torch", "transformers", "matplotlib") if m in sys.modules)
assert not heavy, f"imported {heavy}"
"""


def test_model_free_parts_do_not_import_torch():
    out = subprocess.run([sys.executable, "-c", MODEL_FREE], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.parametrize("part", sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()))
def test_importing_a_part_is_cheap(part):
    """A part's ``__init__`` stays light: importing it alone does not load torch unless the part needs a model."""
    code = f"import sys, splitlab.{part}; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    needs_torch = part in {"kvcache"}
    assert out.stdout.strip() == str(needs_torch), f"splitlab.{part} imported torch: {out.stdout}"

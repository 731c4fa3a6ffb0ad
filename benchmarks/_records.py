"""The benchmark records: what a run writes, where, and how the docs find the latest.

A record is one JSON file in `benchmarks/records/` (committed), written by `make bench`
(`python -m benchmarks`) or by a measurement script (`python -m benchmarks.backsolve`):

- `benchmark`: which program wrote it ("et-ode" for `make bench`, else the script's name);
- `created`: UTC time, ISO 8601; `machine`: CPU model, cores, JAX backend, device kind
  and count, Python and library versions, XLA flags (a path in a flag's value is
  replaced by `<path>`), git commit (`-dirty` when tracked files differed);
- `problem`, `options`, `conventions`: what was measured, how;
- `rows`: one dict per measured quantity: `family`, `name`, `value`, `unit`,
  `reference`, `spread` (`min`, `max`, ...), `goal`, `met`, `note`, `size`; a row that
  belongs in a two-way table has `cell: [row label, column label]`.

No host name, user name or local path is written (`tests/test_bench_records.py` checks
every committed record). This module imports no JAX: the docs build reads records with it
(`docs/hooks/bench_records.py`).
"""

import datetime
import json
from pathlib import Path

RECORDS_DIR = Path(__file__).resolve().parent / "records"
SMOKE_DIR = Path("runs") / "bench"


def skeleton(benchmark: str, machine: dict, problem: dict, options: dict) -> dict:
    """A record without rows yet: `rows` is an empty list to extend."""
    return {
        "benchmark": benchmark,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "problem": problem,
        "options": options,
        "rows": [],
    }


def default_path(record: dict, smoke: bool) -> Path:
    """Where a record goes without `--out`: a smoke run (`--quick`, `--tiny`) into
    runs/bench, a real one into the committed records folder, named by its program, UTC
    time and commit."""
    stamp = record["created"].replace(":", "").replace("-", "")[:15]  # YYYYmmddTHHMMSS
    name = record["benchmark"].replace("et-ode", "bench")
    if smoke:
        return SMOKE_DIR / f"{name}-{stamp}.json"
    commit = record["machine"].get("git_commit") or "nocommit"
    return RECORDS_DIR / f"{stamp}-{name}-{commit}.json"


def load_all(folder: Path = RECORDS_DIR) -> list[tuple[Path, dict]]:
    """Every record in `folder`, oldest first (by `created`)."""
    found = [(path, json.loads(path.read_text())) for path in sorted(folder.glob("*.json"))]
    return sorted(found, key=lambda item: item[1]["created"])


def machine_key(machine: dict) -> tuple:
    """What makes two records' machines the same machine, for "the latest per machine"."""
    return (
        machine.get("cpu"),
        machine.get("cpu_cores"),
        machine.get("jax_backend"),
        machine.get("device_kind"),
        machine.get("devices"),
    )


def machine_label(machine: dict) -> str:
    """`Intel(R) Xeon(R) ..., 2 cores, JAX 0.10.2 on cpu (cpu x 1)`."""
    jax_version = machine.get("versions", {}).get("jax", "?")
    return (
        f"{machine.get('cpu')}, {machine.get('cpu_cores')} cores, JAX {jax_version} on "
        f"{machine.get('jax_backend')} ({machine.get('device_kind')} x "
        f"{machine.get('devices')})"
    )


def latest_per_machine(
    records: list[tuple[Path, dict]], families: set[str]
) -> list[tuple[Path, dict, list[dict]]]:
    """For each machine, the latest record holding a row of any of `families`, with its
    rows of those families (record order); machines in order of first appearance."""
    latest: dict[tuple, tuple[Path, dict, list[dict]]] = {}
    for path, record in records:  # oldest first: a later record replaces an earlier one
        rows = [r for r in record["rows"] if r["family"] in families]
        if rows:
            key = machine_key(record["machine"])
            latest[key] = (path, record, rows)
    return list(latest.values())

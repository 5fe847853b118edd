"""The client x recording matrix as text (end of the test run) and Markdown (docs/clients.md).

Cell symbols: ``✓`` works raw and repaired; ``✗→✓`` fails straight from the upstream and
works through the addon (the repair is needed for this client); ``✗→✗`` / ``✓→✗`` still
fails through the addon (a bug); ``·`` the client does not speak the recording's API.
The raw failures are listed with their symptom under the table.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness import ABLATIONS, Matrix, proves_nothing
from runners import CLIENT_LIST, versions

DOC = Path(__file__).resolve().parents[3] / "docs" / "clients.md"
BEGIN, END = (
    "<!-- clients-matrix:begin (tests/support/clients/harness.py --write-docs) -->",
    "<!-- clients-matrix:end -->",
)
ABL_BEGIN, ABL_END = (
    "<!-- clients-ablation:begin (tests/support/clients/harness.py --ablate --write-docs) -->",
    "<!-- clients-ablation:end -->",
)


def _symbol(m: Matrix, client: str, rec: str) -> str:
    raw, fixed = m.cell("raw", client, rec), m.cell("repaired", client, rec)
    if raw is None and fixed is None:
        return "·"
    r = "?" if raw is None else ("✓" if raw.outcome.ok else "✗")
    f = "?" if fixed is None else ("✓" if fixed.outcome.ok else "✗")
    return "✓" if r == f == "✓" else f"{r}→{f}"


def _clients(m: Matrix) -> list[str]:
    present = {r.client.name for r in m.runs}
    return [c.name for c in CLIENT_LIST if c.name in present]


def raw_failures(m: Matrix) -> dict[str, list[tuple[str, str]]]:
    """recording -> [(client, symptom)] for every client that fails it raw."""
    out: dict[str, list[tuple[str, str]]] = {}
    for rec in m.recordings:
        out[rec.name] = [
            (r.client.name, r.outcome.label)
            for r in m.runs
            if r.mode == "raw" and r.recording.name == rec.name and not r.outcome.ok
        ]
    return out


def version_lines() -> list[str]:
    v = versions()
    gens = [
        (
            "aisdk7",
            (
                f"ai {v.get('aisdk7:ai')} + @ai-sdk/openai {v.get('aisdk7:@ai-sdk/openai')} "
                f"+ @ai-sdk/anthropic {v.get('aisdk7:@ai-sdk/anthropic')} "
                f"+ @ai-sdk/google {v.get('aisdk7:@ai-sdk/google')} (current)"
            ),
        ),
        (
            "aisdk6",
            (
                f"ai {v.get('aisdk6:ai')} + @ai-sdk/openai {v.get('aisdk6:@ai-sdk/openai')} + "
                f"@ai-sdk/openai-compatible {v.get('aisdk6:@ai-sdk/openai-compatible')} (opencode's pins)"
            ),
        ),
        ("aisdk5", f"ai {v.get('aisdk5:ai')} + @ai-sdk/openai {v.get('aisdk5:@ai-sdk/openai')} (v5, bug report era)"),
        ("openai-py", f"openai {v.get('openai-py:openai')} (Python)"),
        ("codex", f"@openai/codex {v.get('codex:@openai/codex')} (`codex exec`)"),
    ]
    return [f"{k}: {d}" for k, d in gens] + [f"node: {v.get('node')}"]


def render_text(m: Matrix) -> str:
    clients = _clients(m)
    width = max([len(r.name) for r in m.recordings] + [9])
    lines = ["client matrix (raw upstream → through the addon); columns:"]
    lines += [f"  {i + 1:>2} {c}" for i, c in enumerate(clients)]
    lines.append(" " * (width + 2) + "".join(f"{i + 1:>6}" for i in range(len(clients))))
    for rec in m.recordings:
        cells = "".join(f"{_symbol(m, c, rec.name):>6}" for c in clients)
        lines.append(f"{rec.name:<{width}}  {cells}   {rec.kind}")
    lines.append("raw failures (the way each client fails without the addon):")
    for rec, fails in raw_failures(m).items():
        for client, label in fails:
            lines.append(f"  {rec} / {client}: {label}")
    broken = [r for r in m.runs if r.mode != "raw" and not r.outcome.ok and r.mode == "repaired"]
    for r in broken:
        lines.append(f"STILL FAILS through the addon: {r.recording.name} / {r.client.name}: {r.outcome.label}")
    nothing = proves_nothing(m)
    if nothing:
        lines.append("proves nothing (no client fails it raw): " + ", ".join(nothing))
    if m.skipped:
        lines.append("no client here speaks: " + ", ".join(r.name for r in m.skipped))
    if m.missing:
        lines.append("NOT INSTALLED (scripts/install-clients): " + ", ".join(c.name for c in m.missing))
    lines.append(f"{len(m.runs)} client runs in {m.seconds:.1f}s; " + "; ".join(version_lines()))
    return "\n".join(lines)


def render_markdown(m: Matrix) -> str:
    clients = _clients(m)
    out = ["Client versions:", ""]
    out += [f"- {line}" for line in version_lines()]
    out += [
        "",
        "| recording | kind | " + " | ".join(f"`{c}`" for c in clients) + " |",
        "|---|---|" + "---|" * len(clients),
    ]
    for rec in m.recordings:
        out.append(f"| `{rec.name}` | {rec.kind} | " + " | ".join(_symbol(m, c, rec.name) for c in clients) + " |")
    out += ["", "How each client fails without the addon (the ✗ cells of the raw side):", ""]
    for rec, fails in raw_failures(m).items():
        if fails:
            out.append(f"- `{rec}`: " + "; ".join(f"`{c}` {label}" for c, label in fails))
    nothing = proves_nothing(m)
    out += [
        "",
        "Buggy recordings no client fails on without the addon (they prove nothing about clients): "
        + (", ".join(f"`{n}`" for n in nothing) if nothing else "none")
        + ".",
    ]
    if m.skipped:
        out.append(
            "Recordings no client here speaks (not covered by client tests): "
            + ", ".join(f"`{r.name}`" for r in m.skipped)
            + "."
        )
    return "\n".join(out)


def ablation_rows(m: Matrix) -> dict[str, dict[str, list[tuple[str, str]]]]:
    """rule -> client -> [(recording, symptom)] for the runs that fail with only that rule
    off (and pass with every rule on: a run that fails anyway proves nothing about a rule)."""
    passing = {(r.client.name, r.recording.name) for r in m.runs if r.mode == "repaired" and r.outcome.ok}
    rows: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for rule in ABLATIONS:
        rows[rule] = {}
        for r in m.runs:
            if r.mode == f"no-{rule}" and not r.outcome.ok and (r.client.name, r.recording.name) in passing:
                rows[rule].setdefault(r.client.name, []).append((r.recording.name, r.outcome.label))
    return rows


def ablation_table(m: Matrix, markdown: bool = True) -> str:
    rows = ablation_rows(m)
    if not markdown:
        out = ["which client run fails with one rule switched off:"]
        for rule, by_client in rows.items():
            out.append(f"  {rule}:" + ("" if by_client else " NO CLIENT CATCHES IT"))
            for client, fails in by_client.items():
                out += [f"    {client} x {rec}: {label}" for rec, label in fails]
        return "\n".join(out)
    out = ["| rule switched off | clients that then fail (recordings) |", "|---|---|"]
    for rule, by_client in rows.items():
        cells = [f"`{client}` ({', '.join(rec for rec, _ in fails)})" for client, fails in by_client.items()]
        out.append(f"| `{ABLATIONS[rule][0]}` | " + ("<br>".join(cells) if cells else "**none**") + " |")
    return "\n".join(out)


def _replace(text: str, begin: str, end: str, body: str) -> str:
    block = f"{begin}\n{body}\n{end}"
    if begin in text and end in text:
        return re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, text, flags=re.DOTALL)
    return text.rstrip("\n") + "\n\n" + block + "\n"


def write_docs(m: Matrix, doc: Path = DOC) -> None:
    text = doc.read_text() if doc.exists() else "# Clients\n"
    text = _replace(text, BEGIN, END, render_markdown(m))
    if any(r.mode.startswith("no-") for r in m.runs):
        text = _replace(text, ABL_BEGIN, ABL_END, ablation_table(m))
    doc.write_text(text)

"""The utility figures in README.md and docs/ are read from, or checked against, the JSON under docs/results/.

A stale number (a figure typed from an earlier run) fails here.  Each check
names the results file it reads.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results" / "utility"
#: The README's utility table: row label -> method; columns -> dataset.
ROWS = {
    "DPDPCA (add/remove release, default)": "dpdpca",
    "DPDPCA centred release (replace-one)": "dpdpca-centred",
    "DPDPCA, the paper's sensitivity (`dpdpca-paper`)": "dpdpca-paper",
    "DPDPCA, owners' distributed noise (`dpdpca-distributed`)": "dpdpca-distributed",
    "pooled (trusted curator)": "pooled", "capePCA": "capepca", "DPdisPCA": "dpdispca", "conv": "conv",
    "PrivateLocalPCA": "private-local-pca", "local": "local", "MOD-SuLQ": "mod-sulq", "FPCA": "fpca",
    "sketch": "sketch",
}
COLUMNS = ("synthetic", "spambase", "mnist")
EPSILONS = (0.1, 1.0, 4.0)


def _epsilon_rows() -> dict[tuple[str, str], list[float | None]]:
    """(dataset, method) -> q/q_o means at EPSILONS, from the results folders.

    A ``<dataset>-dpdpca`` folder (more runs of the protocol's releases) wins for the protocol's rows; otherwise
    the folder named after the dataset, then any other folder of that dataset.
    """
    found: dict[tuple[str, str], tuple[int, list[float | None]]] = {}
    for path in sorted(RESULTS.glob("*/utility.json")):
        folder = path.parent.name
        data = json.loads(path.read_text())
        if data.get("quick"):  # --quick runs other sizes (synthetic D = 50): never the table's figures
            continue
        for dataset, entry in data["datasets"].items():
            panel = entry["sweeps"].get("epsilon")
            if not panel:
                continue
            for method, row in panel["methods"].items():
                means = [row["mean"][panel["x"].index(e)] if e in panel["x"] else None for e in EPSILONS]
                rank = 0 if (folder.endswith("-dpdpca") and method.startswith("dpdpca")) else \
                    1 if folder == dataset else 2
                if (dataset, method) not in found or rank < found[(dataset, method)][0]:
                    found[(dataset, method)] = (rank, means)
    return {key: means for key, (_, means) in found.items()}


def _readme_table() -> dict[str, list[str]]:
    text = (ROOT / "README.md").read_text()
    start = text.index("| | synthetic D = 200 | spambase D = 57 | MNIST-5k D = 784 |")
    rows = {}
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def test_readme_utility_table_matches_its_results_files():
    table = _readme_table()
    results = _epsilon_rows()
    assert set(table) == set(ROWS), "a row of the README's utility table has no method mapping here"
    for label, cells in table.items():
        method = ROWS[label]
        for dataset, cell in zip(COLUMNS, cells):
            means = results.get((dataset, method))
            if cell == "—":
                assert means is None, f"README says no result for {method} on {dataset}, but one exists"
                continue
            assert means is not None, f"README shows {method} on {dataset}, but no results file has it"
            shown = [float(v) for v in cell.split(" / ")]
            assert shown == [round(m, 2) for m in means], (label, dataset, shown, means)


def _sentences_with(text: str, number: str) -> bool:
    return re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", text) is not None


@pytest.mark.parametrize("doc", ["README.md", "docs/baselines.md"])
def test_no_figure_from_before_the_add_remove_comparison_remains(doc):
    """The compare figures once typed into the docs (dpdpca 0.319 vs pooled 0.326) are gone: the docs name the
    results file of every comparison figure they quote."""
    text = (ROOT / doc).read_text()
    # the stale pair stood within one sentence; each number alone may be any other figure (a time, a ratio)
    stale = [m.start() for m in re.finditer(r"(?<![\d.])0\.319(?!\d)", text)]
    assert not any(_sentences_with(text[i:i + 200], "0.326") for i in stale), doc


@pytest.mark.parametrize("relation", ["add-remove", "replace-one"])
def test_the_compare_figures_in_the_docs_are_those_of_their_results_file(relation):
    summary = json.loads((ROOT / "docs" / "results" / "compare" / f"digits-{relation}.json").read_text())
    assert summary["settings"]["relation"] == relation and summary["runs"] == 3
    rows = summary["methods"]
    assert {rows[m]["privacy"]["neighbouring"] for m in ("dpdpca", "pooled", "capepca")} == \
        {"add/remove-one" if relation == "add-remove" else "replace-one"}
    if True:
        for doc in ("README.md", "docs/baselines.md"):
            text = (ROOT / doc).read_text()
            for method in ("dpdpca", "pooled", "capepca"):
                figure = f"{rows[method]['captured_energy_ratio']:.3f}"
                assert _sentences_with(text, figure), (doc, relation, method, figure)


def test_readme_fpca_q_a_figures_are_those_of_their_results_file():
    data = json.loads((RESULTS / "synth-fpca-qa" / "utility.json").read_text())
    text = (ROOT / "README.md").read_text()
    assert data["fpca_q_a"]["relation"] == "replace-one"
    for alpha in ("1.0", "0.5", "2.0"):
        means = data["fpca_q_a"]["alphas"][alpha]["methods"]["fpca"]["mean"]
        assert " / ".join(f"{m:.2f}" for m in means) in " ".join(text.split()), alpha


@pytest.mark.parametrize("folder, dataset, labels", [
    ("mnist-f1", "mnist", {"Non-private PCA": "nonprivate", "subspace": "random-subspace", "(pooled": "pooled",
                           "capePCA": "capepca", "PrivateLocalPCA": "private-local-pca"}),
    ("quick", "digits", {"non-private": "nonprivate", "DPDPCA": "dpdpca", "capePCA": "capepca",
                         "the curator": "pooled", "random": "random-subspace", "PrivateLocalPCA": "private-local-pca"}),
])
def test_readme_f1_figures_are_those_of_their_results_file(folder, dataset, labels):
    data = json.loads((RESULTS / folder / "utility.json").read_text())
    f1 = data["datasets"][dataset]["f1"]
    text = " ".join((ROOT / "README.md").read_text().split())
    start = text.index(f"docs/results/utility/{folder}/")
    for label, method in labels.items():
        figures = " / ".join(f"{m:.2f}" for m in f1["methods"][method]["mean"])
        assert f"{label} {figures}" in text[start - 1500:start + 1500], (folder, label, figures)

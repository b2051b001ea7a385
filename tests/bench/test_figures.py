"""PNGs from ``dpdpca run --out`` and ``dpdpca compare --output`` (and one line without matplotlib)."""

from __future__ import annotations

import json

import numpy as np

from dpdpca import plotting
from dpdpca.cli import main

PNG = b"\x89PNG\r\n\x1a\n"


def test_run_out_writes_scree_and_component_images(tmp_path, capsys):
    assert main(["run", "--owners", "3", "--components", "3", "--key-bits", "768", "--insecure-test-key",
                 "--json", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    for name in ("scree.png", "components.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG
        assert f"wrote {tmp_path / name}" in err
    assert (tmp_path / "result.json").exists()


def test_compare_output_writes_a_bar_chart(tmp_path, capsys):
    out = tmp_path / "cmp.json"
    assert main(["compare", "--dataset", "digits", "--sites", "3", "--components", "3", "--epsilon", "1",
                 "--delta", "1e-5", "--methods", "capepca,nonprivate", "--runs", "2", "--json",
                 "--output", str(out)]) == 0
    assert abs(json.loads(out.read_text())["methods"]["nonprivate"]["captured_energy_ratio"] - 1.0) < 1e-9
    assert (tmp_path / "cmp.png").read_bytes()[:8] == PNG
    assert f"wrote {tmp_path / 'cmp.png'}" in capsys.readouterr().err


def test_without_matplotlib_one_line_and_no_png(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(plotting, "available", lambda: False)
    out = tmp_path / "cmp.json"
    assert main(["compare", "--dataset", "digits", "--sites", "2", "--components", "2", "--epsilon", "1",
                 "--delta", "1e-5", "--methods", "nonprivate", "--output", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.strip() == plotting.NO_MATPLOTLIB
    assert out.exists() and not (tmp_path / "cmp.png").exists()


def test_image_shapes_only_for_image_datasets():
    assert plotting.image_shape_for("digits", 64) == (8, 8)
    assert plotting.image_shape_for("fashion-mnist", 784) == (28, 28)
    assert plotting.image_shape_for("spambase", 57) is None
    assert plotting.image_shape_for(None, 64) is None  # a user's file is never drawn as images


def test_component_images_match_signs(tmp_path):
    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.normal(size=(64, 3)))[0]
    path = plotting.component_images(tmp_path / "c.png", Q, -Q, (8, 8), title="t", n_show=3)
    assert path.read_bytes()[:8] == PNG


def test_components_are_matched_by_absolute_cosine_with_signs_aligned():
    from dpdpca.linalg import match_components

    rng = np.random.default_rng(1)
    R = np.linalg.qr(rng.normal(size=(64, 8)))[0]  # the non-private components (8 candidates)
    # a release that swapped PCs 1 and 2, flipped PC 3, and brought PC 6 up in place of PC 4, plus noise
    P = R[:, [1, 0, 2, 5]] * np.array([1.0, 1.0, -1.0, 1.0]) + 0.05 * rng.normal(size=(64, 4))
    P /= np.linalg.norm(P, axis=0)
    index, sign, cosine = match_components(P, R)
    assert index.tolist() == [1, 0, 2, 5] and sign.tolist() == [1.0, 1.0, -1.0, 1.0]
    assert np.all(cosine > 0.9) and np.all(cosine <= 1.0)
    aligned = R[:, index] * sign
    assert np.all(np.einsum("ij,ij->j", P, aligned) > 0.9)  # each pair now points the same way
    # in order (no matching), two of these pairs would be nearly orthogonal
    assert np.sum(np.abs(np.einsum("ij,ij->j", P, R[:, :4])) < 0.2) >= 3

"""Users' own data: the clipping note, the bounds template (made from no value), Parquet, DataFrames."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from dpdpca.cli import main
from dpdpca.data import (
    FeatureBounds,
    bounds_template,
    clip_rows,
    clipping_note,
    column_names,
    load_bounds_file,
    load_dataset,
    load_file,
    partition,
    scale_by_bounds,
)
from dpdpca.errors import DataError, MissingDependencyError

KEY = ["--key-bits", "768", "--insecure-test-key"]


def _raw_rows(seed: int, n: int = 60) -> np.ndarray:
    """People-like rows: age 18-90, income 0-200 000, a 1-5 score: every row far outside the unit ball."""
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.integers(18, 90, n), rng.uniform(0, 2e5, n), rng.integers(1, 6, n)]).astype(float)


def _csv(path, X, header="age,income,score"):
    np.savetxt(path, X, delimiter=",", header=header, comments="")
    return path


# -- the note when many rows are clipped ---------------------------------------------------------------------

def test_clipping_note_above_five_percent_only():
    assert clipping_note(5, 100) is None and clipping_note(0, 0) is None
    note = clipping_note(6, 100)
    assert note is not None and "\n" not in note
    assert "6 of 100 rows (6%)" in note and "--feature-bounds LO HI" in note and "--feature-bounds 0 255" in note
    assert "dpdpca bounds template" in note


def test_run_on_raw_data_says_so_and_public_bounds_silence_it(tmp_path, capsys):
    data = _csv(tmp_path / "people.csv", _raw_rows(0))
    assert main(["run", *KEY, "--data", str(data), "--owners", "2", "--components", "1", "--json", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["rows_clipped"] == {"1": 30, "2": 30}
    notes = [line for line in captured.err.splitlines() if "note:" in line]
    assert len(notes) == 1 and "60 of 60 rows (100%) were clipped" in notes[0] and "--feature-bounds" in notes[0]
    # the owner fills in the template from public knowledge: nothing is clipped, no note
    bounds = tmp_path / "bounds.csv"
    assert main(["bounds", "template", "--data", str(data), "--out", str(bounds)]) == 0
    bounds.write_text(bounds.read_text().replace("age,,", "age,0,120").replace("income,,", "income,0,1e6")
                      .replace("score,,", "score,1,5"))
    capsys.readouterr()
    assert main(["run", *KEY, "--data", str(data), "--owners", "2", "--components", "1", "--json", "--quiet",
                 "--feature-bounds-file", str(bounds)]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["rows_clipped"] == {"1": 0, "2": 0} and summary["feature_bounds"]["rows_out_of_bounds"] == 0
    assert "note:" not in captured.err


def test_owner_share_says_so_too(tmp_path, capsys):
    assert main(["keygen", "--out-dir", str(tmp_path / "keys"), *KEY]) == 0
    assert main(["owner", "keygen", "--owner-id", "alice", "--out-dir", str(tmp_path / "ids")]) == 0
    data = _csv(tmp_path / "a.csv", _raw_rows(1, n=20))
    capsys.readouterr()
    assert main(["owner", "share", "--public", str(tmp_path / "keys" / "public.json"), "--identity",
                 str(tmp_path / "ids" / "alice.identity.json"), "--data", str(data), "--insecure-test-key",
                 "--out", str(tmp_path / "a.msg"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "20 of 20 rows (100%) were clipped" in err and "--feature-bounds" in err


# -- the template: names only, never a value ----------------------------------------------------------------

def test_template_has_one_empty_row_per_column_and_is_refused_until_filled(tmp_path, capsys):
    data = _csv(tmp_path / "people.csv", _raw_rows(2))
    out = tmp_path / "b.csv"
    assert main(["bounds", "template", "--data", str(data), "--out", str(out)]) == 0
    text = out.read_text()
    rows = [r for r in text.splitlines() if r and not r.startswith("#")]
    assert rows == ["feature,lo,hi", "age,,", "income,,", "score,,"]
    assert "NEVER from the data" in text
    with pytest.raises(DataError, match="must give lo and hi for every feature"):
        load_bounds_file(out)
    # no overwrite without --force
    capsys.readouterr()
    assert main(["bounds", "template", "--data", str(data), "--out", str(out)]) == 2
    assert "--force" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["bounds", "template", "--out", "{out}"], ["run", "-q"]])
def test_a_csv_that_is_not_utf8_is_the_same_one_line_error_for_template_and_run(tmp_path, capsys, argv):
    """Invalid UTF-8 bytes in a CSV: bounds template (which reads the header alone) and run give the same one
    line, never a UnicodeDecodeError traceback; no template is written."""
    data = tmp_path / "bin.csv"
    data.write_bytes(b"\xf7\x81,1\n2,3\n")
    capsys.readouterr()
    assert main([*[a.format(out=tmp_path / "t.csv") for a in argv], "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert err == f"dpdpca: error: data file {str(data)!r} must be UTF-8 text (CSV), got a byte sequence that is " \
                  f"not UTF-8\n", err
    assert not (tmp_path / "t.csv").exists()


@pytest.mark.parametrize("content", ["1,2\n3,s3cret\n", "1,2\n3,\n", "a,b\n1,2\n3,s3cret\n"])
def test_a_cell_that_is_not_a_number_is_named_by_its_position_never_its_value(tmp_path, capsys, content):
    """The data may be private and errors end up in logs: the line names the file, the row and the column."""
    data = tmp_path / "d.csv"
    data.write_text(content)
    capsys.readouterr()
    assert main(["run", "-q", "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert err == f"dpdpca: error: data file {str(data)!r} could not be read: a cell is not a number (text or " \
                  f"empty) at row 1, column 2 (rows from 0 after any header, columns from 1)\n", err


@pytest.mark.parametrize("suffix", [".csv", ".npy", ".parquet"])
def test_template_reads_no_value_of_the_data(tmp_path, monkeypatch, suffix):
    """Two files of the same header and shape but different values give the same template; and with every
    way of reading values disabled, the template is still made."""
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    paths = []
    for seed in (3, 4):
        X = _raw_rows(seed)
        path = tmp_path / f"d{seed}{suffix}"
        if suffix == ".csv":
            _csv(path, X)
        elif suffix == ".npy":
            np.save(path, X)
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({"age": X[:, 0], "income": X[:, 1], "score": X[:, 2]}), path)
        paths.append(path)
    try:
        import pyarrow.parquet as pq_mod
    except ImportError:  # CSV and .npy need no pyarrow
        pq_mod = None

    def refuse(*args, **kwargs):
        raise AssertionError("the template must not read the data's values")

    monkeypatch.setattr(np, "loadtxt", refuse)
    monkeypatch.setattr(np, "load", refuse)
    if pq_mod is not None:
        monkeypatch.setattr(pq_mod, "read_table", refuse)
    templates = [bounds_template(column_names(p), data_name="data") for p in paths]
    assert templates[0] == templates[1]
    expected = ["age", "income", "score"] if suffix != ".npy" else ["column 1", "column 2", "column 3"]
    assert [r.split(",")[0] for r in templates[0].splitlines()[-3:]] == expected


def test_filled_template_scales_rows_and_must_match_the_features(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text(bounds_template(["a", "b"]).replace("a,,", "a,0,16").replace("b,,", "b,-1,1"))
    bounds = load_bounds_file(path)
    Y, outside = scale_by_bounds([[0.0, 1.0], [16.0, -1.0]], bounds)
    assert outside == 0 and np.all(np.linalg.norm(Y, axis=1) <= 1 + 1e-12)
    with pytest.raises(Exception, match="one per feature"):
        scale_by_bounds(np.zeros((2, 3)), bounds)


# -- Parquet -------------------------------------------------------------------------------------------------

def test_parquet_reads_like_csv_with_the_same_checks(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    X = _raw_rows(5)
    pq.write_table(pa.table({"age": X[:, 0].astype(np.int64), "income": X[:, 1], "score": X[:, 2]}),
                   tmp_path / "x.parquet")
    _csv(tmp_path / "x.csv", X)
    assert np.array_equal(load_file(tmp_path / "x.parquet"), load_file(tmp_path / "x.csv"))
    pq.write_table(pa.table({"age": [30.0, None]}), tmp_path / "null.parquet")
    with pytest.raises(DataError, match="must be finite"):
        load_file(tmp_path / "null.parquet")
    pq.write_table(pa.table({"age": [30.0, 40.0], "name": ["a", "b"]}), tmp_path / "text.parquet")
    with pytest.raises(DataError, match="must hold numbers, got column 'name'"):
        load_file(tmp_path / "text.parquet")
    pq.write_table(pa.table({"age": pa.array([], type=pa.float64())}), tmp_path / "empty.parquet")
    with pytest.raises(DataError, match="at least one row"):
        load_file(tmp_path / "empty.parquet")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DataError, match="must be a Parquet file"):
        load_file(tmp_path / "bad.parquet")


def test_parquet_without_pyarrow_names_the_extra(tmp_path, monkeypatch):
    (tmp_path / "x.parquet").write_bytes(b"PAR1")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(MissingDependencyError, match=r"dpdpca\[parquet\]"):
        load_file(tmp_path / "x.parquet")


def test_run_reads_parquet(tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    X = np.random.default_rng(6).uniform(0, 0.5, size=(40, 3))
    pq.write_table(pa.table({f"f{i}": X[:, i] for i in range(3)}), tmp_path / "x.parquet")
    assert main(["run", *KEY, "--data", str(tmp_path / "x.parquet"), "--owners", "2", "--components", "1",
                 "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["n_features"] == 3


# -- pandas DataFrames in the library ------------------------------------------------------------------------

def test_the_library_takes_dataframes():
    pd = pytest.importorskip("pandas")
    from dpdpca import driver
    from dpdpca.protocol import DPDPCA

    ds = load_dataset("digits")
    df = pd.DataFrame(ds.X[:200], columns=[f"px{i}" for i in range(64)])
    Y, outside = scale_by_bounds(df, FeatureBounds(*ds.bounds))
    assert outside == 0 and np.array_equal(Y, scale_by_bounds(ds.X[:200], FeatureBounds(*ds.bounds))[0])
    small = pd.DataFrame(Y[:, :4], columns=list("abcd"))
    assert np.array_equal(clip_rows(small)[0], clip_rows(Y[:, :4])[0])
    parts = partition(small, 2)
    assert all(isinstance(p, np.ndarray) for p in parts)
    result = driver.run("capepca", [small.iloc[:100], small.iloc[100:]], n_components=2, epsilon=1.0, delta=1e-5)
    assert result.components.shape == (4, 2)
    model = DPDPCA(n_components=2, key_bits=768, insecure_test_key=True).fit(small)  # one frame: one site
    assert model.components_.shape == (2, 4) and model.transform(small).shape == (200, 2)
    with pytest.raises(DataError, match="numeric columns only, got column 'name'"):
        clip_rows(pd.DataFrame({"a": [0.1, 0.2], "name": ["x", "y"]}))
    with pytest.raises(DataError, match="must be finite"):
        clip_rows(pd.DataFrame({"a": [0.1, None]}))


def test_the_readme_library_snippet_clips_no_row_of_digits():
    ds = load_dataset("digits")
    X, n_outside = scale_by_bounds(ds.X, FeatureBounds(*ds.bounds))
    assert n_outside == 0 and clip_rows(X)[1] == 0
    assert clip_rows(ds.X)[1] == ds.X.shape[0]  # what the snippet used to do: every row clipped

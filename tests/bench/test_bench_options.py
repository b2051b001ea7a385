"""Every bench command refuses an out-of-range option before any work: click's range check (exit 2, the option
and the value named, no traceback), never a traceback from deep inside the run."""

from __future__ import annotations

import pytest

from dpdpca.cli import main


@pytest.mark.parametrize("argv,option,value", [
    # numpy's ValueError on a negative seed
    (["bench", "timing", "--seed", "-1"], "--seed", "-1"),
    (["bench", "utility", "--seed", "-1"], "--seed", "-1"),
    (["bench", "tensor", "--seed", "-1", "--out", "never"], "--seed", "-1"),
    # ran as one worker
    (["bench", "protocol", "--workers", "0"], "--workers", "0"),
    (["bench", "protocol", "--workers", "-3"], "--workers", "-3"),
    # a CalledProcessError traceback from the peak-RSS child, after the whole benchmark
    (["bench", "crypto", "--quick", "--key-bits", "512", "--insecure-test-key", "--d", "0"], "--d", "0"),
    (["bench", "crypto", "--quick", "--key-bits", "512", "--insecure-test-key", "--d", "-5"], "--d", "-5"),
    # an OverflowError in the prime search (10^20 bits), or hours of it (10^6)
    (["bench", "crypto", "--quick", "--key-bits", "1000000"], "--key-bits", "1000000"),
    (["bench", "timing", "--key-bits", "100000000000000000000"], "--key-bits", "100000000000000000000"),
    (["bench", "utility", "--key-bits", "100000"], "--key-bits", "100000"),
    (["bench", "scale", "--key-bits", "100000"], "--key-bits", "100000"),
    (["bench", "network", "--key-bits", "100000"], "--key-bits", "100000"),
    (["bench", "proofs", "--key-bits", "100000"], "--key-bits", "100000"),
])
def test_bench_refuses_out_of_range_options(capsys, tmp_path, monkeypatch, argv, option, value):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.count("\n") == 1, err
    assert err.startswith(f"dpdpca: error: Invalid value for '{option}': {value} is not in the range"), err
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("argv,line", [
    # the library's "key bits must be ..." (dpdpca.crypto.keys), raised inside the benchmark's run
    (["bench", "crypto", "--quick", "--key-bits", "1000"], "--key-bits must be >= 2048"),
    (["bench", "timing", "--owners", "2,3", "--key-bits", "1000"], "--key-bits must be >= 2048"),
])
def test_bench_errors_name_the_option_typed(capsys, tmp_path, monkeypatch, argv, line):
    """A refusal from inside a benchmark names the option the user typed, as every other command's does: the
    command line wraps every command of its tree, the benchmarks' included (dpdpca.commands.names.cli_names)."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dpdpca: error: {line}") and err.count("\n") == 1, err


def test_every_command_of_the_tree_is_wrapped_once():
    """The wrapping reaches leaf commands, groups' commands and lazy groups' commands, and never twice."""
    import click

    from dpdpca.cli import cli

    seen = []

    def walk(group, ctx):
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            assert getattr(cmd, "_dpdpca_wrapped", False), name
            seen.append(name)
            if isinstance(cmd, click.Group):
                walk(cmd, click.Context(cmd, parent=ctx))

    ctx = click.Context(cli)
    walk(cli, ctx)
    walk(cli, ctx)  # handed out again: still one wrapper each
    callback = cli.get_command(ctx, "bench").get_command(ctx, "crypto").callback
    assert not hasattr(getattr(callback, "__wrapped__", None), "__wrapped__")
    assert {"run", "owner", "share", "bench", "crypto", "intake"} <= set(seen)

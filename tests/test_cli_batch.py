"""tests/cli_batch.py, the runner that puts many CLI runs in one child, on stand-in commands: each case gets its
own output (Python's and the file descriptors'), exit status and environment; a case that kills the child or hangs
is reported as such and the cases after it still run."""
import textwrap

from .cli_batch import run_many

STANDIN = textwrap.dedent('''
    import os, signal, sys, time
    what = sys.argv[1]
    os.environ["STANDIN_SEEN"] = os.environ.get("STANDIN_SEEN", "") + what
    print("py", what, os.environ["STANDIN_SEEN"])
    os.write(1, b"fd1 ")
    os.write(2, b"fd2 ")
    print("to stderr", file=sys.stderr)
    if what == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if what == "hang":
        time.sleep(60)
    if what == "raise":
        raise RuntimeError("escaped")
    if what == "exit":
        sys.exit(int(sys.argv[2]))
''')


def test_each_case_as_its_own_process(tmp_path):
    (tmp_path / "standin").mkdir()
    (tmp_path / "standin" / "__init__.py").write_text("")
    (tmp_path / "standin" / "__main__.py").write_text(STANDIN)
    cases = {"a": ["ok"], "b": ["exit", "3"], "c": ["crash"], "d": ["raise"], "e": ["hang"], "f": ["exit", "0"],
             "g": ["ok"]}
    r = run_many(cases, cwd=tmp_path, module="standin", timeout=3)
    assert list(r) == list(cases)
    out = lambda p: sorted(p.stdout.replace("fd1 ", "").splitlines()) + ["fd1"] * p.stdout.count("fd1 ")
    assert r["a"].returncode == 0 and out(r["a"]) == ["py ok ok", "fd1"]  # both file descriptors' output
    assert sorted(r["a"].stderr.replace("fd2 ", "fd2\n").splitlines()) == ["fd2", "to stderr"]
    assert r["b"].returncode == 3 and out(r["b"]) == ["py exit exit", "fd1"]  # the environment was restored
    assert r["c"].returncode == -11 and "fd1" in r["c"].stdout and r["c"].seconds is None
    assert r["d"].returncode == 1 and "RuntimeError: escaped" in r["d"].stderr and "Traceback" in r["d"].stderr
    assert r["e"].returncode is None and r["e"].seconds is None  # killed past its budget
    assert r["f"].returncode == 0 and r["g"].returncode == 0 and out(r["g"]) == ["py ok ok", "fd1"]
    assert r["g"].args[-2:] == ["standin", "ok"]

"""Python training scripts in `envpin audit`: determinism hazards found with the standard library's `ast`, never
by importing or running the script, judged against the TensorFlow the image holds (a Dockerfile audited in the
same run, the lock, or --tf) and the recipe table's facts for that version.

One module per hazard family holds its Rule records, the checks that report them and their mechanical fixes:
`ops`, `switch`, `seeding`, `data`, `xla`, `environment`, `horovod`, `distributed`
(envpin.audit.rules.script_families lists them). They share a small core: `names` resolves what a name in the
script is (imports, aliases, star imports), `script` walks the script once, `table` matches calls against the
recipe table's entries, `audit` runs the checks, `fixer` applies the fixes with the edits of `edits`. Nothing
here imports the rule registry but the runner and the applier, so the registry can list the families' rules
without a cycle.
"""

#: What `envpin audit` treats as a Python script rather than a Dockerfile.
SUFFIXES = (".py", ".pyw")


def is_script(path: str) -> bool:
    """A `.py` file, or what --fix wrote for one (`train.py.envpin-fixed`). Here, in the package itself, so
    telling scripts from Dockerfiles loads none of the script audit (a Dockerfile-only run never needs it)."""
    return path.lower().removesuffix(".envpin-fixed").endswith(SUFFIXES)


def source_lines(text: str, keepends: bool = False) -> list[str]:
    """A script's lines as Python numbers them: ended by LF, CR LF or CR only. str.splitlines also breaks at form
    feeds, \\x1c-\\x1e, NEL and U+2028/9, which Python keeps inside a line (a page break, a string), so the line
    numbers `ast` gives would point at the wrong lines."""
    import io

    lines = io.StringIO(text, newline="").readlines()
    return lines if keepends else [line.rstrip("\r\n") for line in lines]

"""Ray stays at the edge of the engine; analysis needs neither torch nor Ray."""

import subprocess
import sys


def _modules_after(stmt: str) -> set[str]:
    code = f"import sys; {stmt}; print(' '.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_import_sweep_does_not_import_ray():
    mods = _modules_after("import sweep, sweep.spec, sweep.trial, sweep.cli")
    assert "ray" not in mods


def test_import_analysis_imports_neither_torch_nor_ray():
    mods = _modules_after("import analysis, analysis.charts, analysis.report")
    assert "torch" not in mods and "ray" not in mods

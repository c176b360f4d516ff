"""A torchvision and a timm network by name through the engine (Ray, the worker cache): stitched with the
literature's objectives (`slm`, `fula`) beside `dm` and measured with the new indices, their layer x layer
similarity matrix, and a representation test on the torchvision one: every unit recorded done, every index column
filled, the report drawn."""

import os
import subprocess
import sys

import pytest
import yaml

from tests.conftest import REPO

SPACE = {
    "name": "libnets",
    "data": {"dataset": "digits", "val_size": 200},
    "donors": {
        "tv": {"arch": "torchvision:resnet18", "epochs": 1, "lr": 0.05, "seed": 0},
        "tm": {"arch": "timm:resnet18", "epochs": 1, "lr": 0.05, "seed": 0},
    },
    "stitching": {
        "pairs": [{"front": "zoo:tv", "end": "zoo:tm"}],
        "stitch_points": ["layer2"],
        "end_points": ["layer3"],
        "objectives": ["dm", "slm", "fula"],
        "epochs": 1,
        "dm_samples": 300,
        "indices": ["cka", "rsa", "mknn", "linreg", "cka_debiased"],
    },
    "similarity": [{"pairs": [{"a": "zoo:tv", "b": "zoo:tm"}], "points": "stitch", "images": 200}],
    "representation_tests": [
        {
            "name": "sensitivity_tv",
            "test": "sensitivity",
            "donors": ["zoo:tv"],
            "layers": ["layer2"],
            "ranks": [16, 2],
            "samples": 200,
            "probe": {"train_size": 300, "epochs": 1, "lr": 0.01},
        }
    ],
    "evaluation": {"n_eval_robust": 0},
}


@pytest.mark.slow
@pytest.mark.ray
def test_library_networks_stitch_across_libraries_with_every_new_objective_and_measure(tmp_path):
    (tmp_path / "space.yaml").write_text(yaml.safe_dump(SPACE, sort_keys=False))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-m", "sweep", "run", "space.yaml", "--storage", "results", "--num-cpus", "2"]
    out = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    import analysis

    tables = analysis.load(tmp_path / "results" / "libnets")
    trials, donors = tables["trials"], tables["donors"]
    assert sorted(trials["objective"]) == ["dm", "fula", "slm"] and set(trials["status"]) == {"done"}
    for index in ("cka", "rsa", "mknn", "linreg", "cka_debiased"):
        assert trials[f"sim_{index}"].notna().all(), index
    assert set(trials["front_point"]) == {"layer2"} and set(trials["end_point"]) == {"layer3"}
    assert set(donors["arch"]) == {"torchvision:resnet18", "timm:resnet18"}
    matrix = tables["similarity"]
    assert set(matrix["status"]) == {"done"} and matrix["cka"].notna().all()
    assert {"layer2", "layer3"} <= set(matrix["a_point"]) and {"act1", "layer3"} <= set(matrix["b_point"])
    reptest = tables["reptests"]
    assert set(reptest["status"]) == {"done"} and len(reptest) == 3  # full rank and ranks 16, 2
    report = [sys.executable, "-m", "sweep", "report", "results/libnets"]
    out = subprocess.run(report, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]

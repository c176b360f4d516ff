"""cluster/: every config parses and installs what the project's machines test: pyproject.toml's dependencies at
the exact releases constraints.txt names."""

import re
import subprocess

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

from tests.conftest import REPO

CLUSTER = REPO / "cluster"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
DEPS = PYPROJECT["project"]["dependencies"]
TESTED = dict(
    line.split("#")[0].strip().lower().split("==")
    for line in (REPO / "constraints.txt").read_text().splitlines()
    if line.split("#")[0].strip()
)
RAY_MINOR = re.match(r"\d+\.\d+", TESTED["ray"]).group(0)
RAY_PIN = f"ray[tune]=={RAY_MINOR}.*"


def _tested(dep: str) -> str:
    """`dep` at the release constraints.txt names, or its range where none is named."""
    name = re.match(r"[A-Za-z0-9_.-]+(\[[^\]]*\])?", dep).group(0)
    version = TESTED.get(name.split("[")[0].lower())
    return f"{name}=={version}" if version else dep


LAUNCHERS = ["aws.yaml", "gcp.yaml", "local.yaml"]


@pytest.mark.parametrize("name", LAUNCHERS)
def test_launcher_configs_parse_and_install_the_pinned_ray_and_this_project(name):
    cfg = yaml.safe_load((CLUSTER / name).read_text())
    assert cfg["cluster_name"] and cfg["provider"]["type"] in ("aws", "gcp", "local")
    setup = " ".join(cfg["setup_commands"])
    assert f"'{RAY_PIN}'" in setup and "pip install -q -e ." in setup
    assert any("--head" in c and "--num-gpus=0" in c for c in cfg["head_start_ray_commands"])
    if cfg["provider"]["type"] != "local":
        head = cfg["available_node_types"][cfg["head_node_type"]]
        assert head["resources"]["GPU"] == 0
    # Ray 2.60 token auth: every node starts in token mode with the same token file.
    starts = [c for c in cfg["head_start_ray_commands"] + cfg["worker_start_ray_commands"] if "ray start" in c]
    assert len(starts) == 2 and all(c.startswith("RAY_AUTH_MODE=token ray start") for c in starts)
    assert cfg["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"


def test_rayjob_pins_equal_pyproject_and_ray_version_matches():
    job = yaml.safe_load((CLUSTER / "kuberay-rayjob.yaml").read_text())
    assert job["apiVersion"] == "ray.io/v1" and job["kind"] == "RayJob"
    env = yaml.safe_load(job["spec"]["runtimeEnvYAML"])
    assert env["pip"] == [_tested(d) for d in DEPS]
    spec = job["spec"]["rayClusterSpec"]
    assert spec["rayVersion"].startswith(RAY_MINOR + ".")
    images = [c["image"] for c in spec["headGroupSpec"]["template"]["spec"]["containers"]]
    images += [c["image"] for g in spec["workerGroupSpecs"] for c in g["template"]["spec"]["containers"]]
    assert all(f"ray:{RAY_MINOR}." in i for i in images)
    assert spec["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"
    pods = [spec["headGroupSpec"]["template"]] + [g["template"] for g in spec["workerGroupSpecs"]]
    for c in (c for pod in pods for c in pod["spec"]["containers"]):
        env = {e["name"]: e for e in c["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token" and "secretKeyRef" in env["RAY_AUTH_TOKEN"]["valueFrom"]
    assert all(
        c["resources"]["limits"]["nvidia.com/gpu"]
        for g in spec["workerGroupSpecs"]
        for c in g["template"]["spec"]["containers"]
    )


@pytest.mark.parametrize("name", ["submit.sh", "slurm.sbatch"])
def test_scripts_are_valid_bash_and_run_the_sweep_entry_point(name):
    text = (CLUSTER / name).read_text()
    subprocess.run(["bash", "-n", str(CLUSTER / name)], check=True)
    assert 'run "$SPACE" --address auto --storage "$STORAGE"' in text
    assert "export RAY_AUTH_MODE=" in text and "token" in text  # Ray 2.60 token auth
    if name == "slurm.sbatch":
        assert "ray symmetric-run" in text and "--min-nodes" in text
    else:
        assert "ray job submit --working-dir ." in text

"""The memory model of the indices (each index's `numbers`, on `sweep.costs.memory`'s primitives) and of the
units (`sweep.planning.memory`): its shapes against the layouts the engine computes, the refusal of a space that a
trial's memory cannot hold, and `plan`'s line."""

import pytest
import torch

from sweep.cli import main
from sweep.config.errors import SpecError
from sweep.config.space import load_space
from sweep.costs.memory import GiB, matrix
from sweep.kinds.reptest import cost as reptest_cost
from sweep.kinds.similarity import cost as similarity_cost
from sweep.kinds.training_similarity import cost as training_similarity_cost
from sweep.kinds.tsne import cost as tsne_cost
from sweep.measures.similarity import to_2d
from sweep.planning import memory
from sweep.registry import INDICES

SPACE = "search_spaces/tlm_vs_dm_fmnist.yaml"


@pytest.mark.parametrize("layout", ["flatten", "positions", "pooled"])
@pytest.mark.parametrize("shape", [(8, 5, 3), (7, 6), (11,)])
def test_matrix_shapes_are_those_the_indices_see(layout, shape):
    """The model's (rows, columns) of n images against `to_2d` on a real tensor."""
    acts = torch.zeros(4, *shape)
    want = to_2d(acts, layout).shape if len(shape) > 1 else (4, shape[0])
    assert matrix(shape, layout, 4) == tuple(want)


def test_the_streamed_forms_do_not_grow_with_the_rows():
    """Per-position rows: the covariance forms' workspace is the same for 1,000 and 10,000 images."""
    for name in ("cka", "opd", "pwcca", "rank"):
        numbers = INDICES[name].numbers
        assert numbers(1_024_000, 64, 64) == numbers(10_240_000, 64, 64)


def test_a_space_whose_indices_do_not_fit_memory_per_trial_is_refused_with_what_fits(tmp_path):
    text = open(SPACE).read() + "  memory_per_trial: 0.05\n"
    path = tmp_path / "space.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        memory.check(load_space(path))
    assert err.value.field == "resources.memory_per_trial"
    assert "similarity_samples" in err.value.hint or "samples" in err.value.hint
    need = max(memory.needs(load_space(SPACE)), key=lambda x: x.bytes)
    fits = need.most_images(int(0.05 * GiB))
    assert need.bytes_at(fits) <= 0.05 * GiB < need.bytes_at(fits + 1)
    assert f"{fits:,}" in str(err.value)
    path.write_text(open(SPACE).read() + "  memory_per_trial: 4\n")
    assert load_space(path).memory_per_trial == 4


@pytest.mark.parametrize("command", ["plan", "run"])
def test_plan_and_run_refuse_a_unit_that_does_not_fit_in_one_line_before_anything_is_written(command, tmp_path, capsys):
    """Reading the space accepts any budget (`status` and `report` read a recorded sweep whatever it holds);
    the commands that plan or run refuse a space whose unit would not fit, exit 2, one line naming the field."""
    path = tmp_path / "space.yaml"
    path.write_text(open(SPACE).read() + "  memory_per_trial: 0.05\n")
    assert load_space(path).memory_per_trial == 0.05
    extra = ["--storage", str(tmp_path / "results")] if command == "run" else []
    assert main([command, str(path), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "resources.memory_per_trial" in err[0]
    assert not (tmp_path / "results").exists()


def test_plan_says_what_the_largest_unit_of_each_kind_needs(capsys):
    assert main(["plan", SPACE]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "memory:" in line and "measures need" in line]
    assert len(lines) == 2 and "trial unit" in lines[0] and "reptest unit" in lines[1]
    assert "similarity_samples = 500" in lines[0] and "samples = 1,000" in lines[1]


def test_the_similarity_kinds_are_sized_by_what_they_hold():
    """Minibatch CKA holds a batch, not the images: its need follows `batch_size` alone, and grows as the Grams
    (batch squared) once they dominate; a unit of one network with itself holds one side's Grams; full CKA
    grows with `images`; CKA across epochs grows with the kept epochs."""
    import dataclasses

    sweep = load_space("search_spaces/cianfarani_fmnist.yaml")
    units = sweep.units["similarity"]
    cross = next(u for u in units if u.a_key != u.b_key and u.measure == "cka")
    need = similarity_cost.need(cross)
    assert need.field == "batch_size" and need.n == cross.batch_size
    assert similarity_cost.need(dataclasses.replace(cross, images=cross.images * 10)).bytes == need.bytes
    assert need.bytes_at(2 * need.n) > 2 * need.bytes  # superlinear: the b x b Grams of every point
    self_unit = dataclasses.replace(cross, b_key=cross.a_key, b_points=cross.a_points, b_inputs=cross.a_inputs)
    assert similarity_cost.need(self_unit).bytes < need.bytes
    full = similarity_cost.need(dataclasses.replace(cross, estimator="full"))
    assert full.field == "images" and full.bytes_at(2 * full.n) > 1.9 * full.bytes
    epochs = sweep.units["training_similarity"][0]
    more = dataclasses.replace(epochs, epochs=epochs.epochs * 2)
    assert training_similarity_cost.need(more).bytes > training_similarity_cost.need(epochs).bytes


def test_full_cka_is_sized_above_the_activations_it_holds():
    """The full estimator's need counts every point's activations of its images: at least what `features`
    returns for them on the real network."""
    import dataclasses

    from sweep.models.base import build
    from sweep.models.features import features

    sweep = load_space("search_spaces/cianfarani_fmnist.yaml")
    unit = next(u for u in sweep.units["similarity"] if u.measure == "cka")
    unit = dataclasses.replace(unit, estimator="full", images=16)
    net = build(unit.a_arch, 1, 10, (0.5,), (0.25,), image_size=28).eval()
    with torch.no_grad():
        held = sum(a.numel() * 4 for a in features(net, unit.a_points)(torch.rand(16, 1, 28, 28)))
    assert similarity_cost.need(unit).bytes >= 2 * held  # both sides hold theirs


def test_a_similarity_unit_that_does_not_fit_is_refused_with_the_batch_that_does(tmp_path):
    path = tmp_path / "space.yaml"
    text = open("search_spaces/cianfarani_fmnist.yaml").read()
    small = "resources: {memory_per_trial: 0.05, cpus_per_trial: 1,"
    path.write_text(text.replace("resources: {cpus_per_trial: 1,", small))
    with pytest.raises(SpecError) as err:
        memory.check(load_space(path))
    assert err.value.field == "resources.memory_per_trial" and "batch_size" in err.value.hint
    assert "fewer points" in err.value.hint or "fewer epochs" in err.value.hint


def test_plan_says_what_the_largest_cka_units_need(capsys):
    assert main(["plan", "search_spaces/cianfarani_fmnist.yaml"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "memory:" in line]
    assert any("similarity unit" in x and "batch_size = 500" in x and "minibatch CKA" in x for x in lines)
    assert any("training_similarity unit" in x and "batch_size = 500" in x for x in lines)


def test_representation_tests_size_their_probes_and_tsne_its_points():
    """A representation test's linear probes hold every member's features of `probe_train_size` training images
    (linear in it); a t-SNE unit holds every point's activations of its images: at least what `features`
    returns for them on the real network."""
    import dataclasses

    from sweep.models.base import build
    from sweep.models.features import features

    units = load_space("search_spaces/ding_tests_cifar10.yaml").reptests
    unit = max(units, key=lambda u: reptest_cost.need(u).bytes)
    need = reptest_cost.need(unit)
    assert need.field == "probe_train_size" and need.largest == "probe"  # 10,000 images at layer1: the probes
    assert need.bytes_at(2 * need.n) - need.bytes_at(need.n) == pytest.approx(
        need.bytes_at(3 * need.n) - need.bytes_at(2 * need.n), rel=1e-6
    )
    small = dataclasses.replace(unit, probe_train_size=100)
    assert reptest_cost.need(small).field == "samples"  # then the indices are the larger need

    tsne = load_space("search_spaces/inversion_fmnist.yaml").units["tsne"][0]
    tsne = dataclasses.replace(tsne, images=64)
    net = build(tsne.arch, 1, 10, (0.5,), (0.25,), image_size=28).eval()
    with torch.no_grad():
        held = sum(a.numel() * 4 for a in features(net, tsne.points)(torch.rand(64, 1, 28, 28)))
    assert tsne_cost.need(tsne).bytes >= held
    assert tsne_cost.need(dataclasses.replace(tsne, images=128)).bytes > tsne_cost.need(tsne).bytes


def test_svcca_on_wide_matrices_grows_with_the_features_not_their_square():
    """SVCCA works on each side's thin SVD: with more features than images, doubling the features about doubles
    its workspace (a p x p form, as PWCCA's, would quadruple it; measured: tests/benchmarks/svcca_memory.py)."""
    one, two = (INDICES["svcca"].numbers(1_000, p, p) for p in (50_000, 100_000))
    assert 1.9 * one < two < 2.1 * one
    assert INDICES["pwcca"].numbers(1_000, 100_000, 100_000) > 10 * two


def test_a_low_rank_member_sizes_its_basis_on_the_probes_training_images():
    """A sensitivity test's low-rank basis (`LowRank`: the SVD of its layer's float64 channel rows on
    `probe_train_size` images) is sized as the float32 activations and `LOWRANK` times their float64 rows, the
    activation's size taken here from the built network, not the shapes table; linear in the images."""
    import dataclasses
    import math

    from sweep.models.base import build, split

    units = load_space("search_spaces/ding_tests_cifar10.yaml").reptests
    unit = next(u for u in units if u.test == "sensitivity" and any(r for *_, r in u.members))
    layer = next(layer for _, _, layer, r in unit.members if r)
    net = build(unit.arch, 3, 10, (0.5,) * 3, (0.25,) * 3, image_size=32).eval()
    with torch.no_grad():
        per_image = math.prod(split(net, layer)[0](torch.rand(1, 3, 32, 32)).shape[1:])
    small = dataclasses.replace(unit, samples=10)  # the indices and probes on few test images: the basis is larger
    need = reptest_cost.need(small)
    assert need.largest == "low-rank basis" and need.field == "probe_train_size"
    assert need.bytes == int((4 + reptest_cost.LOWRANK * 8) * unit.probe_train_size * per_image)
    assert need.bytes_at(2 * need.n) == pytest.approx(2 * need.bytes, rel=1e-6)
    unranked = dataclasses.replace(small, members=tuple((*m[:3], None) for m in small.members))
    assert reptest_cost.need(unranked).largest != "low-rank basis"

"""The measures beyond the papers (`rsa`, `mknn`, `linreg`, `cka_debiased`) against independent formulations
written here in numpy / scipy, with a property a bug would break each, and their registration."""

import copy

import numpy as np
import pytest
import torch
from scipy.spatial.distance import pdist
from scipy.stats import spearmanr

from sweep.config.errors import SpecError
from sweep.config.space import parse_space
from sweep.measures.indices import INDICES, Pair
from sweep.measures.indices.cka_debiased import debiased_cka
from sweep.measures.indices.linreg import linreg_r2
from sweep.measures.indices.mknn import mutual_knn
from sweep.measures.indices.rsa import rsa

NEW = ("rsa", "mknn", "linreg", "cka_debiased")


def _pair(n=40, pa=12, pb=9, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, pa))
    b = a[:, :pb] @ rng.standard_normal((pb, pb)) + 0.5 * rng.standard_normal((n, pb))
    return a, b


def _orthogonal(p, seed=1):
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((p, p)))
    return q


def test_rsa_is_scipys_spearman_of_the_correlation_rdms_and_invariant():
    a, b = _pair()
    ref = spearmanr(pdist(a, "correlation"), pdist(b, "correlation")).statistic
    assert rsa(torch.tensor(a), torch.tensor(b)) == pytest.approx(ref, abs=1e-10)
    assert rsa(torch.tensor(5.0 * a), torch.tensor(b)) == pytest.approx(ref, abs=1e-10)  # isotropic scaling
    assert rsa(torch.tensor(a), torch.tensor(a)) == pytest.approx(1.0)


def _jaccard_knn(a, b, k):
    def nn(x):
        d = np.linalg.norm(x[:, None] - x[None], axis=2)
        np.fill_diagonal(d, np.inf)
        return [set(np.argsort(row)[:k]) for row in d]

    return float(np.mean([len(p & q) / len(p | q) for p, q in zip(nn(a), nn(b))]))


def test_mknn_is_the_mean_jaccard_of_the_knn_sets_and_one_for_identical_inputs():
    a, b = _pair()
    assert mutual_knn(torch.tensor(a), torch.tensor(b), k=5) == pytest.approx(_jaccard_knn(a, b, 5), abs=1e-12)
    assert mutual_knn(torch.tensor(a), torch.tensor(b)) == pytest.approx(_jaccard_knn(a, b, 10), abs=1e-12)
    assert mutual_knn(torch.tensor(a), torch.tensor(a)) == 1.0
    rotated = 2.0 * a @ _orthogonal(a.shape[1]) + 7.0  # distances scale uniformly: the same neighbours
    assert mutual_knn(torch.tensor(rotated), torch.tensor(a)) == pytest.approx(1.0)


def test_linreg_is_the_least_squares_r2_and_one_for_an_invertible_map():
    a, b = _pair()
    x = np.hstack([a, np.ones((len(a), 1))])
    w, *_ = np.linalg.lstsq(x, b, rcond=None)
    ref = 1 - ((b - x @ w) ** 2).sum() / ((b - b.mean(0)) ** 2).sum()
    assert linreg_r2(torch.tensor(a), torch.tensor(b)) == pytest.approx(ref, abs=1e-10)
    m = np.random.default_rng(3).standard_normal((12, 12)) + 3 * np.eye(12)
    assert linreg_r2(torch.tensor(a), torch.tensor(a @ m + 1.0)) == pytest.approx(1.0, abs=1e-10)
    assert linreg_r2(torch.tensor(b), torch.tensor(a)) != pytest.approx(ref, abs=1e-3)  # asymmetric


def _hsic_u(k, l_):
    """Song et al. 2012 Eq. 5, written out."""
    n = len(k)
    k, l_ = k - np.diag(np.diag(k)), l_ - np.diag(np.diag(l_))
    one = np.ones(n)
    term = (
        np.trace(k @ l_) + (one @ k @ one) * (one @ l_ @ one) / ((n - 1) * (n - 2)) - 2 / (n - 2) * one @ k @ l_ @ one
    )
    return term / (n * (n - 3))


def test_debiased_cka_is_the_unbiased_hsic_ratio_and_invariant():
    a, b = _pair()
    k, l_ = a @ a.T, b @ b.T
    ref = _hsic_u(k, l_) / np.sqrt(_hsic_u(k, k) * _hsic_u(l_, l_))
    assert debiased_cka(torch.tensor(a), torch.tensor(b)) == pytest.approx(ref, abs=1e-10)
    moved = 4.0 * a @ _orthogonal(a.shape[1])
    assert debiased_cka(torch.tensor(moved), torch.tensor(b)) == pytest.approx(ref, abs=1e-10)
    assert debiased_cka(torch.tensor(a), torch.tensor(a)) == pytest.approx(1.0)


def test_rsa_is_invariant_to_an_orthogonal_map_after_centring_each_feature_set():
    a, b = _pair()
    ref = rsa(torch.tensor(a), torch.tensor(b))
    a0 = a - a.mean(1, keepdims=True)  # Pearson between images centres each image over its features
    # an orthogonal map that fixes the all-ones direction keeps every image's mean and norm: RSA unchanged
    ones = np.ones(a.shape[1]) / np.sqrt(a.shape[1])
    basis = np.linalg.qr(np.column_stack([ones, np.random.default_rng(4).standard_normal((a.shape[1], 11))]))[0]
    rot = basis @ np.block([[np.eye(1), np.zeros((1, 11))], [np.zeros((11, 1)), _orthogonal(11)]]) @ basis.T
    assert not np.allclose(rot, np.eye(12))
    assert np.allclose(rot @ ones, ones) and np.allclose(rot @ rot.T, np.eye(12))
    assert rsa(torch.tensor(a0 @ rot), torch.tensor(b)) == pytest.approx(ref, abs=1e-10)


@pytest.mark.parametrize("name", NEW)
def test_the_new_indices_are_registered_for_trials_and_similarity_with_models(name):
    index = INDICES[name]
    assert set(index.scopes) == {"trial", "similarity"} and index.columns == (f"sim_{name}",)
    assert index.memory is not None and index.work is not None
    assert list(INDICES)[-4:] == list(NEW)  # appended: the shipped columns keep their order


def _mknn_space(block: dict | None = None, similarity: dict | None = None) -> dict:
    from tests.conftest import TINY_SPACE

    space = copy.deepcopy(TINY_SPACE)
    space["evaluation"]["n_eval_robust"] = 0
    space["stitching"] = {**space["stitching"], "objectives": ["dm"], "indices": ["cka", "mknn"], **(block or {})}
    if similarity is not None:
        space["similarity"] = [dict({"pairs": [{"a": "zoo:plain_a", "b": "zoo:plain_a"}], "images": 120}, **similarity)]
    return space


def test_mknn_k_reaches_the_index_in_a_trial_and_is_hashed_only_when_set():
    """A stitching block's `mknn_k`: the trials carry it (their ids change; unset, the ids of before hold),
    `Pair.options` binds it to mutual k-NN's k (the other indices ignore it); refused without mknn, or when it
    is not below the similarity samples."""
    plain = parse_space(_mknn_space()).units["trial"]
    five = parse_space(_mknn_space({"mknn_k": 5})).units["trial"]
    assert {t.mknn_k for t in plain} == {None} and {t.mknn_k for t in five} == {5}
    assert {t.trial_id for t in plain}.isdisjoint(t.trial_id for t in five)
    ten = parse_space(_mknn_space({"mknn_k": 10})).units["trial"]
    assert {t.trial_id for t in ten}.isdisjoint(t.trial_id for t in plain)  # set: recorded, even at the default
    a, b = _pair()
    pair = Pair(torch.tensor(a), torch.tensor(b), options={"mknn_k": 5})
    assert INDICES["mknn"].values(pair) == {"sim_mknn": pytest.approx(_jaccard_knn(a, b, 5), abs=1e-12)}
    assert INDICES["mknn"].values(Pair(torch.tensor(a), torch.tensor(b), options={"mknn_k": None})) == {
        "sim_mknn": pytest.approx(_jaccard_knn(a, b, 10), abs=1e-12)
    }
    assert INDICES["cka"].values(pair) == INDICES["cka"].values(Pair(torch.tensor(a), torch.tensor(b)))
    with pytest.raises(SpecError, match=r"^stitching\.mknn_k: expected an option of a block whose indices list mknn"):
        parse_space(_mknn_space({"mknn_k": 5, "indices": ["cka"]}))
    with pytest.raises(SpecError, match=r"^stitching\.mknn_k: expected fewer neighbours than the 50 similarity_"):
        parse_space(_mknn_space({"mknn_k": 50, "similarity_samples": 50}))


def test_mknn_k_of_a_similarity_entry_binds_k_and_is_refused_for_other_measures():
    from sweep.kinds.similarity.run import measure_fn

    (unit,) = parse_space(_mknn_space(similarity={"measure": "mknn", "mknn_k": 7})).units["similarity"]
    (default,) = parse_space(_mknn_space(similarity={"measure": "mknn"})).units["similarity"]
    assert unit.mknn_k == 7 and default.mknn_k is None and unit.unit_id != default.unit_id
    assert "(mknn, k = 7)" in unit.label and "(mknn)" in default.label
    a, b = _pair()
    assert measure_fn(unit)(torch.tensor(a), torch.tensor(b)) == pytest.approx(_jaccard_knn(a, b, 7), abs=1e-12)
    assert measure_fn(default)(torch.tensor(a), torch.tensor(b)) == pytest.approx(_jaccard_knn(a, b, 10), abs=1e-12)
    (cka,) = parse_space(_mknn_space(similarity={"measure": "cka"})).units["similarity"]
    assert cka.mknn_k is None
    with pytest.raises(SpecError, match=r"^similarity\[0\]\.mknn_k: expected null \(it applies to measure: mknn\)"):
        parse_space(_mknn_space(similarity={"measure": "rsa", "mknn_k": 7}))
    with pytest.raises(SpecError, match=r"^similarity\[0\]\.mknn_k: expected an integer in \[1, 119\], found 120"):
        parse_space(_mknn_space(similarity={"measure": "mknn", "mknn_k": 120}))

"""Similarity indices: invariances, second formulations in float64, bad input."""

import numpy as np
import pytest
import torch

from sweep.measures.cca import cca
from sweep.measures.indices.cka import linear_cka
from sweep.measures.indices.dm import dm_distance, dm_error, dm_fit
from sweep.measures.indices.opd import opd
from sweep.measures.indices.pwcca import pwcca
from sweep.measures.indices.rank import numerical_rank
from sweep.measures.indices.svcca import svcca, svcca_k
from sweep.measures.similarity import low_rank, minibatch_cka, to_2d


def _rng(seed=0):
    return np.random.default_rng(seed)


def _orthogonal(p, rng):
    q, r = np.linalg.qr(rng.standard_normal((p, p)))
    return q * np.sign(np.diag(r))


@pytest.fixture
def x():
    rng = _rng()
    return rng.standard_normal((400, 12)) @ rng.standard_normal((12, 12))


def test_cka_and_opd_are_invariant_to_orthogonal_maps_scale_and_shift(x):
    rng = _rng(1)
    y = 3.7 * x @ _orthogonal(12, rng) + rng.standard_normal(12) * 5
    assert linear_cka(x, y) == pytest.approx(1.0, abs=1e-12)
    assert opd(x, y) == pytest.approx(0.0, abs=1e-10)
    assert pwcca(x, y) == pytest.approx(1.0, abs=1e-10)
    assert dm_distance(x, y) == pytest.approx(0.0, abs=1e-10)


def test_cka_of_independent_random_matrices_is_small():
    rng = _rng(2)
    assert linear_cka(rng.standard_normal((3000, 10)), rng.standard_normal((3000, 10))) < 0.02


def test_cka_gram_and_feature_forms_agree():
    rng = _rng(3)
    a, b = rng.standard_normal((50, 80)), rng.standard_normal((50, 80))
    b[:, :40] += a[:, :40]
    ac, bc = a - a.mean(0), b - b.mean(0)
    want = np.linalg.norm(bc.T @ ac) ** 2 / (np.linalg.norm(ac.T @ ac) * np.linalg.norm(bc.T @ bc))
    assert linear_cka(a, b) == pytest.approx(want, rel=1e-12)  # n < p: computed by the Gram form


def test_cka_is_sound_in_float32_with_a_large_offset():
    rng = _rng(4)
    a = rng.standard_normal((20000, 8)).astype(np.float32) + 1e4
    b = (a - 1e4) @ rng.standard_normal((8, 8)).astype(np.float32) + 1e4
    ref = linear_cka(a.astype(np.float64), b.astype(np.float64))
    assert linear_cka(torch.from_numpy(a), torch.from_numpy(b)) == pytest.approx(ref, rel=1e-12)


def _cca_by_covariance(a, b):
    """Canonical correlations and A's canonical variates from whitened cross-covariance (an independent
    formulation: matrix square roots of the covariances instead of orthonormal bases)."""
    a, b = a - a.mean(0), b - b.mean(0)

    def inv_sqrt(c):
        w, v = np.linalg.eigh(c)
        return v @ np.diag(w**-0.5) @ v.T

    saa, sbb, sab = a.T @ a, b.T @ b, a.T @ b
    m = inv_sqrt(saa) @ sab @ inv_sqrt(sbb)
    u, s, _ = np.linalg.svd(m, full_matrices=False)
    h = a @ inv_sqrt(saa) @ u
    return s, h / np.linalg.norm(h, axis=0)


def test_cca_and_pwcca_agree_with_a_covariance_formulation():
    rng = _rng(5)
    a = rng.standard_normal((600, 10))
    b = np.hstack([a[:, :6] @ rng.standard_normal((6, 6)), rng.standard_normal((600, 9))])
    b += 0.3 * rng.standard_normal(b.shape)
    rho, _ = cca(a, b)
    rho2, h2 = _cca_by_covariance(a, b)
    np.testing.assert_allclose(rho.numpy(), rho2, atol=1e-10)
    an = (a - a.mean(0)) / np.linalg.norm(a - a.mean(0))
    alpha = np.abs(h2.T @ an).sum(axis=1)
    assert pwcca(a, b) == pytest.approx(float((alpha * rho2).sum() / alpha.sum()), abs=1e-10)
    assert 0.0 < pwcca(a, b) < 1.0


def test_opd_agrees_with_the_explicit_procrustes_solution():
    rng = _rng(6)
    a = rng.standard_normal((300, 7))
    b = rng.standard_normal((300, 9))
    b[:, :7] += 2 * a
    an = (a - a.mean(0)) / np.linalg.norm(a - a.mean(0))
    bn = (b - b.mean(0)) / np.linalg.norm(b - b.mean(0))
    ap = np.hstack([an, np.zeros((300, 2))])  # pad A to B's width
    u, _, vt = np.linalg.svd(ap.T @ bn)
    r = u @ vt  # argmin ||B - A R|| over orthogonal R
    assert opd(a, b) == pytest.approx(np.linalg.norm(bn - ap @ r) ** 2, abs=1e-10)


def test_opd_row_space_form_for_wide_representations_agrees():
    rng = _rng(11)
    a, b = rng.standard_normal((30, 50)), rng.standard_normal((30, 70))
    b[:, :50] += a
    an = (a - a.mean(0)) / np.linalg.norm(a - a.mean(0))
    bn = (b - b.mean(0)) / np.linalg.norm(b - b.mean(0))
    want = 2 - 2 * np.linalg.svd(bn.T @ an, compute_uv=False).sum()
    assert opd(a, b) == pytest.approx(want, abs=1e-10)


def test_minibatch_cka_converges_to_the_full_batch_value():
    rng = _rng(7)
    n = 8000
    a = rng.standard_normal((n, 16))
    b = a @ rng.standard_normal((16, 16)) + 2.0 * rng.standard_normal((n, 16))
    full = linear_cka(a, b)
    estimates = [minibatch_cka((a[i : i + m], b[i : i + m]) for i in range(0, n, m)) for m in (50, 200, 1000)]
    # Tolerances per batch size, with margin over what this seed gives (|estimate - full| = 0.0017, 0.00036,
    # 0.00066 for batches of 50, 200, 1000: past a few hundred images per batch the full value's own sampling
    # noise dominates).
    for estimate, tolerance in zip(estimates, (0.01, 0.004, 0.004)):
        assert abs(estimate - full) < tolerance
    with pytest.raises(ValueError, match="more than 3 examples"):
        minibatch_cka([(a[:3], b[:3])])


def _hsic1_reference(x: np.ndarray, y: np.ndarray) -> float:
    """Song et al. (2012), Eq. 5, written out with numpy on uncentred features: K~, L~ are the Gram matrices
    with zeroed diagonals; (tr(K~L~) + 1'K~1 1'L~1 / ((n-1)(n-2)) - 2/(n-2) 1'K~L~1) / (n(n-3))."""
    n = x.shape[0]
    k, l_ = x @ x.T, y @ y.T
    np.fill_diagonal(k, 0.0)
    np.fill_diagonal(l_, 0.0)
    one = np.ones(n)
    value = (
        np.trace(k @ l_) + (one @ k @ one) * (one @ l_ @ one) / ((n - 1) * (n - 2)) - 2 / (n - 2) * (one @ k @ l_ @ one)
    )
    return value / (n * (n - 3))


def test_minibatch_cka_agrees_with_an_independent_formulation():
    """Cianfarani et al. 2022 2.3's estimator (Nguyen et al.'s minibatch CKA): per batch HSIC_1, summed, then
    normalised; here against Song et al.'s formula written out on the raw features, batch by batch."""
    rng = _rng(21)
    a = rng.standard_normal((300, 12))
    b = a @ rng.standard_normal((12, 9)) + rng.standard_normal((300, 9))
    batches = [(a[i : i + 64], b[i : i + 64]) for i in range(0, 300, 64)]
    kl = sum(_hsic1_reference(x, y) for x, y in batches)
    kk = sum(_hsic1_reference(x, x) for x, _ in batches)
    ll = sum(_hsic1_reference(y, y) for _, y in batches)
    assert minibatch_cka(batches) == pytest.approx(kl / np.sqrt(kk * ll), abs=1e-10)


@pytest.mark.parametrize("shift", [1.0, 1e2, 1e3, 1e4])
def test_minibatch_cka_ignores_feature_means(shift):
    """Adding a constant to every feature changes nothing (HSIC_1 is shift-invariant): features are centred per
    batch, so large means cost no precision and never give NaN."""
    rng = _rng(22)
    a = rng.standard_normal((512, 40))
    b = np.tanh(a @ rng.standard_normal((40, 30))) + 0.5 * rng.standard_normal((512, 30))
    base = minibatch_cka((a[i : i + 128], b[i : i + 128]) for i in range(0, 512, 128))
    moved = minibatch_cka((a[i : i + 128] + shift, b[i : i + 128] - shift) for i in range(0, 512, 128))
    assert np.isfinite(moved) and abs(moved - base) < 1e-10


def test_minibatch_cka_matrix_is_every_pair_at_once():
    """The P x Q accumulator gives, for every pair, what the one-pair estimate gives; with A = B it is
    symmetric with ones on the diagonal."""
    from sweep.measures.similarity import MinibatchCKA

    rng = _rng(23)
    reps = [rng.standard_normal((200, d)) for d in (5, 8, 13)]
    reps[2][:, :5] += reps[0]
    acc, self_acc = MinibatchCKA(), MinibatchCKA()
    for i in range(0, 200, 50):
        acc.update([r[i : i + 50] for r in reps[:2]], [r[i : i + 50] for r in reps])
        batch = [r[i : i + 50] for r in reps]
        self_acc.update(batch, batch)
    matrix = acc.value().numpy()
    for p in range(2):
        for q in range(3):
            one = minibatch_cka((reps[p][i : i + 50], reps[q][i : i + 50]) for i in range(0, 200, 50))
            assert matrix[p, q] == pytest.approx(one, abs=1e-12)
    square = self_acc.value().numpy()
    assert np.allclose(square, square.T, atol=1e-12) and np.allclose(np.diag(square), 1.0, atol=1e-12)


def test_numerical_rank_and_low_rank():
    rng = _rng(8)
    a = rng.standard_normal((500, 5)) @ rng.standard_normal((5, 20))  # rank 5 in 20 dimensions
    assert numerical_rank(a) == 5
    approx = low_rank(a, 5)
    np.testing.assert_allclose(approx.numpy(), a, atol=1e-9)
    assert numerical_rank(low_rank(rng.standard_normal((500, 20)), 3)) == 3
    with pytest.raises(ValueError, match=r"rank: expected an integer in \[1, 20\]"):
        low_rank(a, 21)


def test_to_2d_layouts():
    t = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).reshape(2, 3, 4, 5)
    assert to_2d(t).shape == (2, 60) and to_2d(t, "positions").shape == (40, 3)
    assert torch.equal(to_2d(t, "positions")[1], t[0, :, 0, 1])
    assert to_2d(torch.zeros(2, 7, 8), "positions").shape == (14, 8)


@pytest.mark.parametrize("fn", [linear_cka, pwcca, opd, dm_distance])
def test_bad_input_is_refused_not_nan(fn):
    rng = _rng(9)
    a = rng.standard_normal((50, 4))
    with pytest.raises(ValueError, match="NaN"):
        fn(np.where(np.eye(50, 4) > 0, np.nan, a), a)
    with pytest.raises(ValueError, match="empty"):
        fn(np.zeros((0, 4)), np.zeros((0, 4)))
    with pytest.raises(ValueError, match="same examples"):
        fn(a, a[:40])
    with pytest.raises(ValueError, match="2-D"):
        fn(a.reshape(50, 2, 2), a)


def test_dm_distance_refuses_an_undetermined_fit():
    rng = _rng(10)
    with pytest.raises(ValueError, match="not determined"):
        dm_distance(rng.standard_normal((5, 8)), rng.standard_normal((5, 3)))


def _pwcca_zero_padded(a, b, tol=1e-8):
    """PWCCA as Balogh & Jelasity 2025 Eq. 5-6 and Ding et al. define it, written independently of the engine: canonical
    directions from the covariance matrices (pseudo-inverse square roots over their non-null eigenspaces),
    all of A's directions weighted, rho = 0 for the directions B cannot match."""
    a, b = a - a.mean(0), b - b.mean(0)
    a = a / np.linalg.norm(a)

    def pinv_sqrt(c):
        w, v = np.linalg.eigh(c)
        keep = w > tol * w.max()
        return v[:, keep] @ np.diag(w[keep] ** -0.5) @ v[:, keep].T

    saa, sbb, sab = a.T @ a, b.T @ b, a.T @ b
    wa = pinv_sqrt(saa)
    m = wa @ sab @ pinv_sqrt(sbb)
    u, s, _ = np.linalg.svd(m)  # full: as many directions as A has neurons
    rank_a = int((np.linalg.eigvalsh(saa) > tol * np.linalg.eigvalsh(saa).max()).sum())
    u = u[:, :rank_a]
    rho = np.zeros(rank_a)
    rho[: min(len(s), rank_a)] = s[:rank_a]
    rho[rho < tol] = 0.0
    h = a @ wa @ u
    h /= np.linalg.norm(h, axis=0)
    unmatched = rho == 0  # a tie: the stated convention takes A's principal directions inside it
    if unmatched.sum() > 1:
        basis, _, _ = np.linalg.svd(h[:, unmatched].T @ a, full_matrices=False)
        h[:, unmatched] = h[:, unmatched] @ basis
    alpha = np.abs(h.T @ a).sum(axis=1)
    return float((alpha * rho).sum() / alpha.sum())


def _rank_k_with_noise(a, k, rng, noise=0.3):
    """A rank-k B whose canonical correlations with A are distinct (no degenerate subspace, so the canonical
    directions and PWCCA's weights are unique)."""
    ac = a - a.mean(0)
    u, s, vh = np.linalg.svd(ac, full_matrices=False)
    scores = u[:, :k] * s[:k] + noise * rng.standard_normal((len(a), k)) * s[:k] / np.sqrt(len(a))
    return scores @ rng.standard_normal((k, a.shape[1]))


@pytest.mark.parametrize("k", [20, 10, 5, 1])
def test_pwcca_zero_pads_the_directions_b_cannot_match(k):
    rng = _rng(11)
    a = rng.standard_normal((500, 20))
    b = _rank_k_with_noise(a, k, rng)
    assert pwcca(a, b) == pytest.approx(_pwcca_zero_padded(a, b), abs=1e-8)
    rho, h = cca(a, b)
    assert rho.shape == (20,) and h.shape == (500, 20)  # every direction of A, the unmatched with rho 0
    assert (rho[k:] == 0).all() and (rho[:k] > 0.5).all()


def test_pwcca_against_low_rank_approximations_falls_with_the_rank():
    """Balogh & Jelasity 2025's sensitivity test: B = the rank-k approximation of A. B matches A's top k principal
    directions
    exactly (rho = 1) and none of the others (rho = 0), so PWCCA is the share of A's projection weight in its
    top k principal directions: sum_{i<=k} s_i |v_i|_1 / sum_i s_i |v_i|_1 for A_c / |A_c| = U S V^T. It
    falls with k, and B rounded to float32 gives the same value (rounding noise is not a direction)."""
    rng = _rng(3)
    a = rng.standard_normal((500, 20)) @ np.diag(np.linspace(3.0, 0.5, 20))
    ac = a - a.mean(0)
    _, s, vh = np.linalg.svd(ac / np.linalg.norm(ac), full_matrices=False)
    weight = s * np.abs(vh).sum(axis=1)
    values = []
    for k in (20, 10, 5, 1):
        expected = weight[:k].sum() / weight.sum()
        values.append(pwcca(a, low_rank(a, k)))
        assert values[-1] == pytest.approx(expected, abs=1e-9)
        assert pwcca(a, low_rank(a, k).to(torch.float32)) == pytest.approx(expected, abs=1e-6)
    assert values[0] == pytest.approx(1.0, abs=1e-9)
    assert values == sorted(values, reverse=True) and values[-1] < 0.2


def test_the_engine_computes_every_catalogued_index_and_the_schema_holds_their_columns():
    """An index's columns, report name and direction are written once, in the torch-free catalogue: the
    engine has a function for each entry (and no index outside it), and the schemas derive the columns: the
    trials table those of the indices of scope "trial", the similarity table those of scope "similarity"."""
    from sweep.registry import INDICES
    from sweep.store.catalogue import INDEX_CATALOGUE
    from sweep.store.schema import schema, trial_schema

    assert list(INDICES) == list(INDEX_CATALOGUE)
    for name, index in INDICES.items():
        assert index.entry is INDEX_CATALOGUE[name]
        in_trials = set(index.columns) <= set(trial_schema().names)
        assert in_trials == ("trial" in index.scopes), name
        if "similarity" in index.scopes:
            assert index.entry.similarity_column in schema("similarity").names
        if index.entry.reptest_column:
            assert index.entry.reptest_column in schema("reptests").names
    assert {"sim_cka", "sim_dm", "rank_front", "rank_receiver_end"} <= set(trial_schema().names)
    assert str(trial_schema().field("rank_front").type) == "int32"


def test_the_permutation_null_separates_a_paired_similarity_from_a_broken_pairing():
    """Index.null: a sender and a target that are functions of the same images score far above the index with
    the pairing broken (p = 1 / (1 + shuffles), the smallest possible); two independent ones do not. For a
    distance (OPD) the null sits on the other side."""
    from sweep.measures.indices import INDICES, Pair

    g = torch.Generator().manual_seed(0)
    x = torch.randn(80, 10, generator=g, dtype=torch.float64)
    paired = Pair(x, x @ torch.randn(10, 6, generator=g, dtype=torch.float64))
    unrelated = Pair(x, torch.randn(80, 6, generator=g, dtype=torch.float64))
    cka, opd = INDICES["cka"], INDICES["opd"]
    value = cka.values(paired)["sim_cka"]
    null = cka.null(paired, value, permutations=49, seed=0)
    assert null["sim_cka_p"] == pytest.approx(1 / 50) and null["sim_cka_null"] < value - 0.3
    other = cka.null(unrelated, cka.values(unrelated)["sim_cka"], permutations=49, seed=0)
    assert other["sim_cka_p"] > 0.05
    d = opd.values(paired)["sim_opd"]
    dnull = opd.null(paired, d, permutations=49, seed=0)
    assert dnull["sim_opd_p"] == pytest.approx(1 / 50) and dnull["sim_opd_null"] > d  # a distance must beat it low
    assert cka.null(paired, value, permutations=49, seed=0) == null  # reproducible from its seed
    assert INDICES["rank"].null(paired, 3.0, permutations=9, seed=0) == {}  # ranks have no null


def test_streamed_forms_agree_with_whole_matrix_formulas_across_chunks(monkeypatch):
    """The chunked forms (rows for tall matrices, features for wide ones) against numpy on the whole matrix,
    with chunks small enough that every sum crosses several of them."""
    import sweep.measures.matrices as matrices

    monkeypatch.setattr(matrices, "ROWS", 7)
    rng = _rng(12)
    tall = rng.standard_normal((100, 6)) @ rng.standard_normal((6, 9)) + 50.0  # rank 6 of 9, a large mean
    centred = tall - tall.mean(0)
    np.testing.assert_allclose(matrices.centred_covariance(tall).numpy(), centred.T @ centred, rtol=1e-9, atol=1e-7)
    assert numerical_rank(tall) == 6 and numerical_rank(tall.T.copy()) == 6  # tall: covariance; wide: Gram
    theta = rng.standard_normal((10, 4))
    b = rng.standard_normal((100, 4))
    want = np.sum((tall @ theta[:-1] + theta[-1] - b) ** 2) / np.sum(b**2)
    assert dm_error(torch.from_numpy(theta), tall, b) == pytest.approx(want, rel=1e-10)


def test_opd_from_grams_agrees_with_the_svd_on_rank_deficient_float32_data():
    """Wide, rank 5, float32: the Gram route squares the condition, so the noise directions come out at about
    sqrt(eps64) of the largest singular value each; 30 of them bound the difference by about 5e-7."""
    rng = _rng(13)
    a = (rng.standard_normal((30, 5)) @ rng.standard_normal((5, 50))).astype(np.float32)
    b = np.hstack([a, rng.standard_normal((30, 20)).astype(np.float32)])
    an, bn = (x.astype(np.float64) - x.astype(np.float64).mean(0) for x in (a, b))
    an, bn = an / np.linalg.norm(an), bn / np.linalg.norm(bn)
    want = 2 - 2 * np.linalg.svd(bn.T @ an, compute_uv=False).sum()
    assert opd(torch.from_numpy(a), torch.from_numpy(b)) == pytest.approx(want, abs=1e-6)


def test_pwcca_of_tall_float32_data_keeps_the_directions_float32_resolves():
    """Per-position rows make tall matrices (1,000 images x 32 x 32 positions = 1,024,000 rows). The rank
    tolerance must not grow with the rows: numpy's max(n, p) x eps32 rule dropped every direction below 1.2%
    of the largest here, and PWCCA moved from its float64 value 0.848 to 0.871."""
    g = torch.Generator().manual_seed(14)
    r, p = 100_000, 48
    spec = 0.8 ** torch.arange(p, dtype=torch.float64)  # the last direction at 2e-5 of the first
    a = (torch.randn(r, p, generator=g, dtype=torch.float64) * spec) @ torch.linalg.qr(
        torch.randn(p, p, generator=g, dtype=torch.float64)
    )[0]
    b = a @ torch.randn(p, p, generator=g, dtype=torch.float64) + torch.randn(r, p, generator=g, dtype=torch.float64)
    assert pwcca(a.float(), b.float()) == pytest.approx(pwcca(a, b), abs=1e-6)


@pytest.mark.parametrize("case", ["independent", "b_contains_a", "a_rank_deficient_float32"])
def test_pwcca_from_covariances_agrees_with_the_whole_matrix_form(monkeypatch, case):
    """Past `ROWS` rows PWCCA is computed from p x p covariances accumulated over chunks of rows; the same
    data below that threshold takes the SVD of the whole matrix. Covariances square the condition: with
    singular values spread over 1e3 here, the two agree to about 1e-10; ties (rho = 1 where B contains A)
    and a duplicated column of float32 A exercise the basis choice."""
    import sweep.measures.matrices as matrices

    rng = _rng(15)
    a = rng.standard_normal((900, 8)) * np.geomspace(1, 1e-3, 8)
    b = np.hstack([a[:, :5] @ rng.standard_normal((5, 5)), rng.standard_normal((900, 4))])
    if case == "independent":
        b = rng.standard_normal((900, 6))
    elif case == "b_contains_a":
        b = np.hstack([a, rng.standard_normal((900, 3))])
    else:
        a = np.hstack([a, a[:, :1]]).astype(np.float32)
    whole = pwcca(a, b)
    monkeypatch.setattr(matrices, "ROWS", 100)  # now the covariance form, over 9 chunks
    assert pwcca(a, b) == pytest.approx(whole, abs=1e-9)


def test_cka_and_opd_of_tall_matrices_from_covariances_agree_with_the_whole_matrix_form(monkeypatch):
    """Per-position rows past `ROWS`: CKA's sums and OPD's B^T A from covariances over chunks of rows (no
    squaring of the condition: the same sums, in another order)."""
    import sweep.measures.matrices as matrices

    rng = _rng(16)
    a = rng.standard_normal((700, 9)) + 20.0
    b = np.hstack([a[:, :4] @ rng.standard_normal((4, 4)), rng.standard_normal((700, 3))]) - 5.0
    whole = linear_cka(a, b), opd(a, b)
    monkeypatch.setattr(matrices, "ROWS", 64)
    assert linear_cka(a, b) == pytest.approx(whole[0], abs=1e-12)
    assert opd(a, b) == pytest.approx(whole[1], abs=1e-12)


def test_the_dm_distance_sums_its_test_images_in_batches_of_resized_senders(monkeypatch):
    """The DM index resizes the sender batch by batch (a layer4 sender at layer1's size is 2 MB per image):
    across several batches it equals the error of the map on every image resized at once."""
    import sweep.measures.matrices as matrices
    from sweep.measures.indices import Pair
    from sweep.registry import INDICES
    from sweep.stitching.stitcher import Stitcher

    g = torch.Generator().manual_seed(17)
    sender, target = torch.randn(30, 6, 2, 2, generator=g), torch.randn(30, 3, 4, 4, generator=g)
    fit = torch.randn(20, 6, 2, 2, generator=g), torch.randn(20, 3, 4, 4, generator=g)
    resize = Stitcher.for_shapes(torch.Size((1, 6, 2, 2)), torch.Size((1, 3, 4, 4))).resize
    pair = Pair(sender, target, resize=resize, fit=lambda: fit)
    theta = dm_fit(to_2d(resize(fit[0]), "positions"), to_2d(fit[1], "positions"))
    whole = dm_error(theta, to_2d(resize(sender), "positions"), to_2d(target, "positions"))
    monkeypatch.setattr(matrices, "ROWS", 40)  # batches of 2 images (16 rows each)
    assert INDICES["dm"].values(pair)["sim_dm"] == pytest.approx(whole, rel=1e-12)


def test_streamed_cka_is_linear_cka_on_all_the_images():
    """Full CKA accumulated batch by batch (feature-space sums about a shift) against `linear_cka` on the whole
    matrices, with feature means far from zero and batches that do not divide the images."""
    from sweep.measures.similarity import StreamedCKA

    g = torch.Generator().manual_seed(0)
    a = [torch.randn(600, 5, 2, 2, generator=g) * 3 + 1000, torch.randn(600, 7, generator=g)]
    b = [a[0].flatten(1) @ torch.randn(20, 9, generator=g) + torch.randn(600, 9, generator=g)]
    b.append(torch.randn(600, 3, generator=g) - 50)
    acc = StreamedCKA()
    for i in range(0, 600, 128):
        acc.update([x[i : i + 128] for x in a], [y[i : i + 128] for y in b])
    want = torch.tensor([[linear_cka(x.flatten(1), y) for y in b] for x in a], dtype=torch.float64)
    assert acc.n == 600 and acc.value().shape == (2, 2)
    assert torch.allclose(acc.value(), want, rtol=1e-9, atol=1e-12)
    assert 0.3 < float(want[0, 0]) < 0.9  # a related pair, not a trivially zero or one value


def test_the_full_estimator_streams_where_the_products_are_smaller_and_gives_the_same_matrix(monkeypatch):
    """`full_matrix` on narrow points (fewer features than images) accumulates; on wide ones it holds the
    activations; both give `linear_cka` on all the images."""
    from sweep.kinds.similarity import run as kind
    from sweep.measures.full_cka import cka_streams
    from sweep.measures.similarity import StreamedCKA

    g = torch.Generator().manual_seed(1)
    w1, w2 = torch.randn(12, 6, generator=g), torch.randn(12, 40, generator=g)
    fa = lambda x: [x @ w1, torch.relu(x @ w1)]  # noqa: E731
    fb = lambda x: [torch.tanh(x @ w2)]  # noqa: E731
    x = torch.randn(700, 12, generator=g)
    want = torch.tensor([[linear_cka(p, q) for q in fb(x)] for p in fa(x)], dtype=torch.float64)
    streamed = []

    class Spy(StreamedCKA):
        def __init__(self):
            super().__init__()
            streamed.append(self)

    monkeypatch.setattr(kind, "StreamedCKA", Spy)
    assert cka_streams(700, [6, 6], [40]) and not cka_streams(30, [6, 6], [40])
    got, times = kind.full_matrix(fa, fb, x, x, torch.device("cpu"))
    assert streamed and times is None and torch.allclose(got, want, rtol=1e-9, atol=1e-12)
    streamed.clear()
    few, times = kind.full_matrix(fa, fb, x[:30], x[:30], torch.device("cpu"))  # 40 features, 30 images: held
    # a time per pair, each measured (the matrix starts at zeros: a pair left out stays 0)
    assert times.shape == (2, 1) and torch.isfinite(times).all() and (times > 0).all()
    want_few = torch.tensor([[linear_cka(p, q) for q in fb(x[:30])] for p in fa(x[:30])], dtype=torch.float64)
    assert not streamed and torch.allclose(few, want_few, rtol=1e-9, atol=1e-12)


def _svcca_reference(a, b, keep=0.99, max_k=None):
    """SVCCA in numpy: numpy's SVD for the 99%-variance reductions (at most `max_k` directions), canonical
    correlations as the singular values of C_aa^-1/2 C_ab C_bb^-1/2. Returns (value, k_A, k_B)."""

    def reduce(x):
        x = x - x.mean(0)
        _, s, vt = np.linalg.svd(x, full_matrices=False)
        k = int(np.searchsorted(np.cumsum(s**2) / (s**2).sum(), keep)) + 1
        return x @ vt[: k if max_k is None else min(k, max_k)].T

    ra, rb = reduce(a), reduce(b)

    def inv_sqrt(c):
        w, v = np.linalg.eigh(c)
        return v @ np.diag(w**-0.5) @ v.T

    rho = np.linalg.svd(inv_sqrt(ra.T @ ra) @ (ra.T @ rb) @ inv_sqrt(rb.T @ rb), compute_uv=False)
    return rho[: min(ra.shape[1], rb.shape[1])].mean(), ra.shape[1], rb.shape[1]


def test_svcca_against_whitened_covariances_in_numpy():
    """SVCCA (Raghu et al. 2017) against an independent formulation (`_svcca_reference`); and its invariances
    (an orthogonal map and a scale of one side give 1)."""
    g = torch.Generator().manual_seed(3)
    a = torch.randn(400, 20, generator=g) @ torch.diag(torch.linspace(3, 0.05, 20))  # a spectrum the 99% cuts
    b = a[:, :12] @ torch.randn(12, 9, generator=g) + 3 * torch.randn(400, 9, generator=g)
    got = svcca(a, b)
    assert got == pytest.approx(_svcca_reference(a.double().numpy(), b.double().numpy())[0], rel=1e-9)
    assert 0.2 < got < 0.99
    q, _ = torch.linalg.qr(torch.randn(20, 20, generator=g))
    assert svcca(a, 3 * a @ q + 7) == pytest.approx(1.0, abs=1e-9)


def test_svcca_caps_the_directions_each_side_keeps_and_reports_them():
    """The unit's protocol: each side keeps the fewest directions reaching 99% of the variance, at most
    `max_k`; `svcca_k` returns both k with the value, as the numpy formulation counts them. Independent data
    score lower with fewer directions (the overfitting the cap bounds)."""
    g = torch.Generator().manual_seed(5)
    a = torch.randn(300, 40, generator=g) @ torch.diag(torch.linspace(3, 0.5, 40))  # 99% needs most of the 40
    b = a[:, :25] @ torch.randn(25, 30, generator=g) + torch.randn(300, 30, generator=g)
    for max_k in (None, 6, 15):
        value, k_a, k_b = svcca_k(a, b, max_k=max_k)
        want, want_a, want_b = _svcca_reference(a.double().numpy(), b.double().numpy(), max_k=max_k)
        assert (k_a, k_b) == (want_a, want_b) and value == pytest.approx(want, rel=1e-9)
        assert value == svcca(a, b, max_k=max_k)
    assert svcca_k(a, b, max_k=6)[1:] == (6, 6) and min(svcca_k(a, b)[1:]) > 15
    x, y = torch.randn(300, 60, generator=g), torch.randn(300, 60, generator=g)
    assert svcca(x, y, max_k=10) < svcca(x, y) - 0.2  # 60 kept of 300 examples vs 10: the null grows with k/n

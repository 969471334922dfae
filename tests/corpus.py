"""A corpus of structured matrices, built by code (no downloads), for the robustness tests.

Real inputs are not Gaussian noise: graph adjacency, incidence and Laplacian matrices (0/±1,
sparse, many exactly zero singular values), low-rank sparse matrices, duplicated and zero rows
and columns, the classic ill-conditioned families (Kahan, Hilbert, Vandermonde), block-diagonal
and column scalings far from 1, subnormal and near-overflow entries, exactly orthogonal
matrices and rank one. They stand in for the SuiteSparse matrices of the W-cycle paper's
accuracy table (wcycle-svd-batched-jacobi.txt, Table VII: 0/±1 and weighted graph/incidence
matrices of order ~500, rank 95-500).

`corpus(dtype, sizes)` yields `(name, A)` with A in `dtype`: every family at every size of
`sizes` that it takes (square families take n, rectangular ones m x n from the size and its
aspect). Builders are deterministic (their own seeded generator), so a failing case replays
by its name.
"""

import math
import zlib

import torch

F64 = torch.float64


def _gen(name, m, n):
    return torch.Generator().manual_seed(zlib.crc32(f"{name}/{m}x{n}".encode()))


def _adjacency(n, edges, weights=None):
    A = torch.zeros(n, n, dtype=F64)
    if len(edges):
        e = torch.as_tensor(edges, dtype=torch.long)
        w = torch.ones(len(edges), dtype=F64) if weights is None else weights
        A[e[:, 0], e[:, 1]] = w
        A[e[:, 1], e[:, 0]] = w
    return A


def _path_edges(n):
    return [(i, i + 1) for i in range(n - 1)]


def _grid_edges(n):
    # the largest r x c grid with r * c <= n (isolated leftover vertices: zero rows and columns)
    r = max(1, int(math.isqrt(n)))
    c = max(1, n // r)
    idx = lambda i, j: i * c + j  # noqa: E731
    e = [(idx(i, j), idx(i, j + 1)) for i in range(r) for j in range(c - 1)]
    e += [(idx(i, j), idx(i + 1, j)) for i in range(r - 1) for j in range(c)]
    return e


def _random_edges(n, avg_degree, g):
    k = max(1, int(avg_degree * n / 2))
    ij = torch.randint(0, n, (k, 2), generator=g)
    ij = ij[ij[:, 0] != ij[:, 1]]
    return [tuple(x) for x in ij.tolist()]


def _incidence(n_vertices, edges, signed=True):
    # vertices x edges; a connected graph's signed incidence matrix has rank n_vertices - 1
    B = torch.zeros(n_vertices, max(1, len(edges)), dtype=F64)
    for k, (i, j) in enumerate(edges):
        B[i, k] = 1.0
        B[j, k] = -1.0 if signed else 1.0
    return B


def _laplacian(A):
    return torch.diag(A.sum(1)) - A


def _sparse_pm(m, n, density, g, signed):
    M = (torch.rand(m, n, generator=g) < density).to(F64)
    if signed:
        M = M * (torch.randint(0, 2, (m, n), generator=g).to(F64) * 2 - 1)
    return M


def _kahan(n, theta=1.2):
    # upper triangular, s^(i) on the diagonal, -c s^(i) above: famous for QR without pivoting
    s, c = math.sin(theta), math.cos(theta)
    R = torch.triu(torch.full((n, n), -c, dtype=F64), 1) + torch.eye(n, dtype=F64)
    return torch.diag(s ** torch.arange(n, dtype=F64)) @ R


def _hilbert(m, n):
    i = torch.arange(m, dtype=F64).unsqueeze(1)
    j = torch.arange(n, dtype=F64).unsqueeze(0)
    return 1.0 / (i + j + 1.0)


def _vandermonde(m, n):
    x = torch.linspace(0, 1, m, dtype=F64)
    return x.unsqueeze(1) ** torch.arange(n, dtype=F64)


def _hadamard(n):
    H = torch.ones(1, 1, dtype=F64)
    while H.shape[0] < n:
        H = torch.cat([torch.cat([H, H], 1), torch.cat([H, -H], 1)], 0)
    return H[:n, :n] if n == H.shape[0] else None


def _square(f):
    return lambda m, n, g, dt: f(n, g, dt) if m == n else None


def _fit(A, m, n):
    # crop or zero-pad a built matrix to m x n
    out = torch.zeros(m, n, dtype=F64)
    r, c = min(m, A.shape[0]), min(n, A.shape[1])
    out[:r, :c] = A[:r, :c]
    return out


def _scale_limits(dt):
    # the column scalings of the issue: 1e+-30 in float32, 1e+-300 in float64
    return 1e30 if dt == torch.float32 else 1e300


def _subnormal(dt):
    return 1e-40 if dt == torch.float32 else 1e-310


def _block_diag_scaled(m, n, g, dt):
    big = 1e15 if dt == torch.float32 else 1e100
    nb = max(1, min(4, n // 2))
    exps = torch.linspace(-1, 1, nb, dtype=F64)
    A = torch.zeros(m, n, dtype=F64)
    rs, cs = [m * k // nb for k in range(nb + 1)], [n * k // nb for k in range(nb + 1)]
    for k in range(nb):
        blk = torch.randn(rs[k + 1] - rs[k], cs[k + 1] - cs[k], generator=g, dtype=F64)
        A[rs[k]:rs[k + 1], cs[k]:cs[k + 1]] = blk * big ** exps[k].item()
    return A


def _columns_scaled(m, n, g, dt):
    lim = _scale_limits(dt)
    e = torch.linspace(-1, 1, n, dtype=F64)
    return torch.randn(m, n, generator=g, dtype=F64) * lim ** e


def _duplicated(m, n, g, dt):
    r = max(1, min(m, n) // 3)
    B = torch.randn(m, r, generator=g, dtype=F64)
    A = B[:, torch.randint(0, r, (n,), generator=g)]  # duplicated columns
    rows = torch.randint(0, m, (m,), generator=g)
    rows[: m // 2] = torch.arange(m // 2)
    return A[rows]  # and duplicated rows


def _zero_rows_cols(m, n, g, dt):
    A = torch.randn(m, n, generator=g, dtype=F64)
    A[torch.rand(m, generator=g) < 0.3] = 0
    A[:, torch.rand(n, generator=g) < 0.3] = 0
    return A


def _weighted_graph_scaled(m, n, g, dt):
    # the Table VII kind: a sparse weighted incidence-like matrix, rank deficient, entries spread
    # over many orders of magnitude (rows and columns of very different weight)
    A = _sparse_pm(m, n, min(1.0, 4.0 / n), g, signed=True)
    A = A[:, torch.randint(0, max(1, n // 2), (n,), generator=g)]  # repeated columns: rank <= n/2
    w = 10.0 ** (torch.rand(m, 1, generator=g, dtype=F64) * 8 - 4)
    return A * w


FAMILIES = {
    # name: builder(m, n, generator, dtype) -> float64 m x n (None: not this shape)
    "path_adjacency": _square(lambda n, g, dt: _adjacency(n, _path_edges(n))),
    "grid_adjacency": _square(lambda n, g, dt: _adjacency(n, _grid_edges(n))),
    "star_adjacency": _square(lambda n, g, dt: _adjacency(n, [(0, i) for i in range(1, n)])),
    "random_graph_adjacency": _square(lambda n, g, dt: _adjacency(n, _random_edges(n, 3.0, g))),
    "weighted_graph_adjacency": _square(
        lambda n, g, dt: _adjacency(n, e := _random_edges(n, 4.0, g),
                                    10.0 ** (torch.rand(len(e), generator=g, dtype=F64) * 6 - 3))),
    "grid_laplacian": _square(lambda n, g, dt: _laplacian(_adjacency(n, _grid_edges(n)))),
    "random_graph_laplacian": _square(lambda n, g, dt: _laplacian(_adjacency(n, _random_edges(n, 2.0, g)))),
    "path_incidence": lambda m, n, g, dt: _fit(_incidence(m, _path_edges(m)), m, n),
    "random_graph_incidence": lambda m, n, g, dt: _fit(_incidence(m, _random_edges(m, 2.0 * n / m + 1, g)[:n]), m, n),
    "bipartite_biadjacency": lambda m, n, g, dt: _sparse_pm(m, n, min(1.0, 3.0 / n), g, signed=False),
    "sparse01_low_rank": lambda m, n, g, dt: _sparse_pm(m, max(1, n // 8), 0.2, g, False)
    @ _sparse_pm(max(1, n // 8), n, 0.2, g, False),
    "sparse_pm1_low_rank": lambda m, n, g, dt: _sparse_pm(m, max(1, n // 5), 0.1, g, True)
    @ _sparse_pm(max(1, n // 5), n, 0.1, g, True),
    "weighted_incidence_scaled": _weighted_graph_scaled,
    "duplicated_rows_cols": _duplicated,
    "zero_rows_cols": _zero_rows_cols,
    "kahan": _square(lambda n, g, dt: _kahan(n)),
    "hilbert": lambda m, n, g, dt: _hilbert(m, n),
    "vandermonde": lambda m, n, g, dt: _vandermonde(m, n),
    "block_diag_scaled": _block_diag_scaled,
    "columns_scaled_extreme": _columns_scaled,
    "subnormal": lambda m, n, g, dt: torch.randn(m, n, generator=g, dtype=F64) * _subnormal(dt),
    # entries up to finfo.max / (2 sqrt(mn)): as near the limit as keeps S (<= ||A||_F) representable
    "near_overflow": lambda m, n, g, dt: torch.rand(m, n, generator=g, dtype=F64).mul(2).sub(1)
    * (torch.finfo(dt).max / (2 * math.sqrt(m * n))),
    "hadamard": _square(lambda n, g, dt: _hadamard(n)),
    "permutation": _square(lambda n, g, dt: torch.eye(n, dtype=F64)[torch.randperm(n, generator=g)]),
    "rank_one": lambda m, n, g, dt: torch.randn(m, 1, generator=g, dtype=F64) @ torch.randn(1, n, generator=g,
                                                                                             dtype=F64),
    "zero": lambda m, n, g, dt: torch.zeros(m, n, dtype=F64),
}


def build(name, m, n, dtype):
    """Family `name` at m x n in `dtype`, or None where the family has no such shape."""
    A = FAMILIES[name](m, n, _gen(name, m, n), dtype)
    if A is None or A.shape != (m, n):
        return None
    return A.to(dtype)


def shapes(sizes, aspects=((1, 1), (2, 1), (1, 2))):
    """m x n shapes from sizes: square, tall (2:1) and wide (1:2)."""
    out = []
    for s in sizes:
        for a, b in aspects:
            m, n = (s * a) // max(a, b), (s * b) // max(a, b)
            if min(m, n) >= 1 and (m, n) not in out:
                out.append((m, n))
    return out


def corpus(dtype, sizes, aspects=((1, 1), (2, 1), (1, 2)), families=None):
    """(name, A) for every family and shape; name is 'family/mxn'."""
    for fam in families or FAMILIES:
        for m, n in shapes(sizes, aspects):
            A = build(fam, m, n, dtype)
            if A is not None:
                yield f"{fam}/{m}x{n}", A

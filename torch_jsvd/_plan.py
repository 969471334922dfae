"""torch_jsvd.plan: what the engine will do with given shapes."""

import json

import torch


def plan(shapes, dtype=torch.float32, device="cuda", compute_uv=True, sync=True):
    """The level selector's plan for matrices of the given (m, n) shapes: that of ``svd`` and
    ``svdvals``, or with ``sync=False`` that of ``svd_ex``, which never synchronises (so neither
    ``start_v`` nor ``v``'s ``triangular_solve``, below).

    On CUDA, per matrix: whether it is transposed (the engine works on the tall
    orientation) and its levels: ``whole_svd_warp`` (at most 32 columns: the
    whole matrix and V in the registers of a group of lanes, with
    ``lanes_per_matrix`` and ``rows_per_lane``), ``whole_svd_smem`` (the whole
    matrix and V in shared memory, one block; ``steps`` says whether each lane
    group keeps one column of its pairs in registers, ``registers``, or reads
    both from shared memory, ``shared``; with registers, ``rows_padded_to``: the
    column height, A's rows and V's, padded with zero rows to what the lanes hold,
    where the padding fits; ``"v": "rotation_log"``: float64 matrices whose V does not fit
    beside A, V in global memory, rotated after each sweep from the sweep's logged
    rotations, uniform batches only), or ``block_pairs`` of a width w whose rotations
    come from ``pair_svd_smem`` (the SVD of a 2w-column pair in shared memory)
    or ``gram_evd_smem`` (the EVD of the pair's Gram matrix in shared memory),
    with the kernel's block size and shared memory. A uniform batch of at least
    256 columns (float64: 32 where a matrix fits one block's shared memory, else 128,
    and 16 where rows >= max(512, 8 columns)) also has ``precondition``
    (``householder_qr_whole_smem``, one launch, or ``householder_qr`` and its panel width,
    and ``jacobi_on``: the Jacobi then runs on R^T of W = QR, and ``levels``
    are that Jacobi's; with compute_uv, ``v``: ``rotations`` where that Jacobi
    accumulates V, ``triangular_solve`` where svd solves for it afterwards, float64
    only, docs/design.md). One matrix of at least 256 columns, up to 4 of at least 1024,
    up to 4 tall ones (rows >= 2 columns) of 16 to 255 columns (with ``jacobi_on_x``:
    ``qr_path``, the Jacobi on A V0 through the QR where A V0 is not yet converged),
    and batches of tall matrices (rows >= 4 columns, float64 2) of 16 to 64 columns have ``start_v``
    instead (``gram_eigh``: svd and svdvals run the Jacobi on A V0, V0 the eigenvectors
    of A^T A, from ``solver``: torch.linalg.eigh, or this engine's batched Jacobi on the
    float64 Gram matrices; svd_ex runs without it and with the QR; float64 only where
    every matrix's smallest column norm is at least ``min_column_ratio`` times its
    largest, else also as without it). The device's real shared
    memory limit and SM count are included. The plan of a shape depends on the
    number of matrices launched together, so pass the whole batch's shapes. In
    a list (svd_varlen), a shape shared by at least 32 members is solved as a
    uniform batch of its own (the 8 largest such groups; ``shape_group``: its
    member count), with a uniform batch's plan, and the rest as one list, whose
    near-square members of 256 columns or more take the Gram eigenvectors' start
    where the list has as many as a uniform batch would need (float32 100,
    float64 40): ``start_v`` with ``padded_to``, the order of its size class
    (the members of a class share one cuSOLVER syevBatched call).
    On CPU: one-sided Jacobi per matrix, parallel over the batch.
    """
    device = torch.device(device)
    rows = [int(m) for m, _ in shapes]
    cols = [int(n) for _, n in shapes]
    if device.type == "cpu":
        return {
            "device": "cpu",
            "matrices": [
                {"rows": m, "cols": n, "transposed": m < n, "levels": [{"level": 1, "kernel": "one_sided_jacobi_cpu"}]}
                for m, n in zip(rows, cols)
            ],
        }
    if device.type != "cuda":
        raise ValueError(f"torch_jsvd.plan: no engine for device type '{device.type}'")
    if not hasattr(torch.ops.jsvd, "plan"):
        raise RuntimeError("torch_jsvd.plan: this build of torch_jsvd has no CUDA engine")
    index = device.index if device.index is not None else torch.cuda.current_device()
    out = json.loads(torch.ops.jsvd.plan(rows, cols, dtype, compute_uv, index, sync))
    out["device"] = torch.cuda.get_device_name(index)
    return out


def tune(shapes, dtype=torch.float32, device="cuda", compute_uv=True):
    """Calibrate the auto-tuner ahead of time for uniform batches of the given
    ``(batch, m, n)`` (or ``(m, n)``, batch 1) shapes, and return its choice for each.

    For batches of matrices with at least 512 columns (after QR preconditioning, the
    Jacobi's shape), the tailoring auto-tuner times the GEMM level at each block width
    against the shared-memory block pairs on this device (one and three sweeps of each) and
    keeps the fastest, in memory and in a cache file per device
    (``$JSVD_CACHE_DIR``, else ``$XDG_CACHE_HOME/torch_jsvd``, else ``~/.cache/torch_jsvd``).
    Without ``tune``, a call calibrates the first time it meets a shape (its first call
    then synchronises and takes those seconds). ``JSVD_TUNER=0`` turns the tuner off.
    Returns a list of ``{"shape", "levels", "tuner"}`` dicts: the plan of the shape's
    matrices and why (``tuner`` is absent for shapes the tuner does not decide).
    """
    device = torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"torch_jsvd.tune: the auto-tuner is for CUDA devices, got '{device.type}'")
    if not hasattr(torch.ops.jsvd, "tune"):
        raise RuntimeError("torch_jsvd.tune: this build of torch_jsvd has no CUDA engine")
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"torch_jsvd.tune: dtype must be torch.float32 or torch.float64, got {dtype}")
    index = device.index if device.index is not None else torch.cuda.current_device()
    out = []
    for shape in shapes:
        shape = tuple(int(v) for v in shape)
        if len(shape) == 2:
            shape = (1,) + shape
        if len(shape) != 3 or min(shape) < 1:
            raise ValueError(f"torch_jsvd.tune: shapes are (batch, m, n) or (m, n) of positive sizes, got {shape}")
        b, m, n = shape
        first = json.loads(torch.ops.jsvd.tune(b, m, n, dtype, compute_uv, index))["matrices"][0]
        entry = {"shape": shape, "levels": first["levels"]}
        if "tuner" in first:
            entry["tuner"] = first["tuner"]
        out.append(entry)
    return out

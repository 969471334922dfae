"""torch_jsvd.plan: what the engine will do with given shapes."""

import json

import torch


def plan(shapes, dtype=torch.float32, device="cuda", compute_uv=True):
    """The level selector's plan for matrices of the given (m, n) shapes.

    On CUDA, per matrix: whether it is transposed (the engine works on the tall
    orientation) and its levels: ``whole_svd_warp`` (at most 32 columns: the
    whole matrix and V in the registers of a group of lanes, with
    ``lanes_per_matrix`` and ``rows_per_lane``), ``whole_svd_smem`` (the whole
    matrix and V in shared memory, one block; ``steps`` says whether each lane
    group keeps one column of its pairs in registers, ``registers``, or reads
    both from shared memory, ``shared``), or ``block_pairs`` of a width w whose rotations
    come from ``pair_svd_smem`` (the SVD of a 2w-column pair in shared memory)
    or ``gram_evd_smem`` (the EVD of the pair's Gram matrix in shared memory),
    with the kernel's block size and shared memory. A uniform batch of at least
    256 columns also has ``precondition`` (``householder_qr``, its panel width,
    and ``jacobi_on``: the Jacobi then runs on R^T of W = QR, and ``levels``
    are that Jacobi's). The device's real shared
    memory limit and SM count are included. The plan of a shape depends on the
    number of matrices launched together, so pass the whole batch's shapes.
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
    out = json.loads(torch.ops.jsvd.plan(rows, cols, dtype, compute_uv, index))
    out["device"] = torch.cuda.get_device_name(index)
    return out

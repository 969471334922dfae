"""Convergence of the blocked level: sweeps (info) per case."""
import os, torch, torch_jsvd
torch.manual_seed(0)
tag = f"cross_only={os.environ.get('JSVD_CROSS_ONLY', '1')} w={os.environ.get('JSVD_PAIR_WIDTH', 'auto')}"
for dt, (b, m, n) in [(torch.float64, (2, 128, 128)), (torch.float64, (2, 200, 200)), (torch.float32, (2, 256, 256)),
                      (torch.float32, (2, 512, 512)), (torch.float64, (2, 300, 520))]:
    A = torch.randn(b, m, n, dtype=dt, device="cuda")
    U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False)
    ref = torch.linalg.svdvals(A.double())
    err = ((S.double() - ref).abs().max() / ref.max()).item()
    plan = torch_jsvd.plan([(m, n)] * b, dtype=dt, device="cuda")["matrices"][0]["levels"]
    print(f"{tag} {str(dt)[6:]} {b}x{m}x{n}: info {info.tolist()} S err {err:.1e} plan {[(l['kernel'], l['width']) for l in plan]}", flush=True)

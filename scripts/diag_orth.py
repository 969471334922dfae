import sys, torch, torch_jsvd
def orth(Q):
    Q = Q.double(); G = Q.mT @ Q
    return (G - torch.eye(G.shape[-1], dtype=G.dtype, device=G.device)).norm(dim=(-2, -1)).max().item()
for case in sys.argv[1:]:
    shape, dt = case.split(":"); b, m, n = (int(v) for v in shape.split("x")); dtype = getattr(torch, dt)
    A = torch.randn(b, m, n, device="cuda", dtype=dtype, generator=torch.Generator(device="cuda").manual_seed(1))
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True); ts = []
    for _ in range(3):
        e0.record(); U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False); e1.record(); torch.cuda.synchronize(); ts.append(e0.elapsed_time(e1))
    rec = (((U.double() * S.double()[..., None, :]) @ Vh.double() - A.double()).norm(dim=(-2, -1)) / A.double().norm(dim=(-2, -1))).max().item()
    print(f"{case:22s} {sorted(ts)[1]:8.2f} ms orthU {orth(U):.2e} orthV {orth(Vh.mT):.2e} rec {rec:.2e} sweeps {info.max().item()}", flush=True)

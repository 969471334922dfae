"""Orthogonality of U and V and reconstruction, GPU engine next to the CPU engine, in units of eps."""
import torch, torch_jsvd
def orth(Q):
    Q = Q.double(); G = Q.mT @ Q
    return torch.linalg.matrix_norm(G - torch.eye(G.shape[-1], dtype=G.dtype, device=G.device)).max().item()
for dt in (torch.float32, torch.float64):
    eps = torch.finfo(dt).eps
    for (b, m, n) in [(2, 96, 96), (2, 128, 128), (2, 256, 256), (2, 200, 200), (1, 520, 300)]:
        A = torch.randn(b, m, n, dtype=dt, device="cuda")
        U, S, Vh, info = torch_jsvd.svd_ex(A, full_matrices=False)
        Uc, Sc, Vhc, infoc = torch_jsvd.svd_ex(A.cpu(), full_matrices=False)
        k = S.shape[-1]
        rec = (((U * S[..., None, :]) @ Vh - A).double().norm() / A.double().norm()).item()
        print(f"{dt} {b}x{m}x{n} gpu: info {info.tolist()} orthU {orth(U)/eps:.0f}eps orthV {orth(Vh.mT)/eps:.0f}eps rec {rec/eps:.0f}eps | cpu: info {infoc.tolist()} orthU {orth(Uc)/eps:.0f} orthV {orth(Vhc.mT)/eps:.0f} | bound {10*max(m,n)}", flush=True)
print("plan:", flush=True)
print(torch_jsvd.plan([(32, 32)], dtype=torch.float32, device="cuda"), flush=True)

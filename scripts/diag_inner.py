"""Accuracy and time of the blocked level against the inner-sweep cap (env JSVD_INNER_SWEEPS)."""
import os, time, torch, torch_jsvd
def orth(Q):
    Q = Q.double(); G = Q.mT @ Q
    return torch.linalg.matrix_norm(G - torch.eye(G.shape[-1], dtype=G.dtype, device=G.device)).max().item()
torch.manual_seed(0)
tag = f"inner={os.environ.get('JSVD_INNER_SWEEPS', 'default')} w={os.environ.get('JSVD_PAIR_WIDTH', 'auto')}"
for dt, (b, m, n) in [(torch.float64, (2, 128, 128)), (torch.float64, (2, 256, 256)), (torch.float64, (1, 520, 300)),
                      (torch.float32, (100, 512, 512)), (torch.float32, (200, 256, 256)), (torch.float64, (100, 512, 512))]:
    eps = torch.finfo(dt).eps
    A = torch.randn(b, m, n, dtype=dt, device="cuda")
    torch_jsvd.svd(A[:1], full_matrices=False)
    torch.cuda.synchronize(); t = time.perf_counter()
    U, S, Vh = torch_jsvd.svd(A, full_matrices=False)
    torch.cuda.synchronize(); ms = (time.perf_counter() - t) * 1e3
    _, _, _, info = torch_jsvd.svd_ex(A[:4], full_matrices=False)
    rec = (((U * S[..., None, :]) @ Vh - A).double().norm(dim=(1, 2)) / A.double().norm(dim=(1, 2))).max().item()
    print(f"{tag} {str(dt)[6:]} {b}x{m}x{n}: {ms:8.1f} ms sweeps {info.tolist()} orthU {orth(U)/eps:6.0f} orthV {orth(Vh.mT)/eps:6.0f} rec {rec/eps:5.0f} eps (bound {10*max(m,n)})", flush=True)

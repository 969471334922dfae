import torch, torch_jsvd
A = torch.randn(4, 64, 64, device="cuda")
print(torch_jsvd.svd_ex(A, max_sweeps=1)[3], flush=True)
try:
    torch_jsvd.svd(A, max_sweeps=1)
except RuntimeError as e:
    print("raised", type(e).__name__, str(e)[:80], flush=True)
A = torch.randn(4, 64, 64, device="cpu")
try:
    torch_jsvd.svd(A, max_sweeps=1)
except RuntimeError as e:
    print("cpu raised", type(e).__name__, flush=True)

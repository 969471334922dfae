"""Low-rank compression of a small trained model with torch_jsvd.compress (issue 22's demonstration).

Trains a character-level transformer (a 64-character context; on a GPU 6 blocks of width 192, 37 Linear
layers, 2.7M parameters; on the CPU 4 blocks of width 96) on this repository's own documentation (README.md, docs/*.md: offline, in every clone)
for --train-s seconds, then compresses every Linear layer at several energies with one
torch_jsvd.compress call each (one svd_varlen call for all layers), and reports the validation loss,
next-character accuracy and parameter count against the kept fraction, next to the model before
compression. Also times the layers' SVDs: one svd_varlen call against a loop of torch.linalg.svd.

    bash scripts/demo.sh compress                  # or: python examples/compress_demo.py [--train-s 60]

Output: a table, and compress_demo.png + compress_demo.json in --out (default docs/results/).
"""

import argparse, copy, glob, json, math, os, time

import torch
from torch import nn

import torch_jsvd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONTEXT = 64


def corpus():
    files = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    text = "\n".join(open(f, encoding="utf-8").read() for f in files)
    chars = sorted(set(text))
    ids = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
    return ids, len(chars)


class Block(nn.Module):
    """Pre-norm causal self-attention and MLP, every projection its own nn.Linear (compress replaces
    each by two low-rank layers; nn.MultiheadAttention reads its projections' weights directly)."""

    def __init__(self, width, heads=6, dropout=0.1):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.q, self.k, self.v, self.o = (nn.Linear(width, width) for _ in range(4))
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, t, c = x.shape
        h = self.ln1(x)
        q, k, v = (f(h).view(b, t, self.heads, c // self.heads).transpose(1, 2) for f in (self.q, self.k, self.v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.o(a.transpose(1, 2).reshape(b, t, c)))
        return x + self.drop(self.down(nn.functional.gelu(self.up(self.ln2(x)))))


class CharTransformer(nn.Module):
    def __init__(self, vocab, width, depth):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(CONTEXT, width)
        self.blocks = nn.Sequential(*(Block(width) for _ in range(depth)))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, x):  # (batch, CONTEXT) characters -> (batch, CONTEXT, vocab) next-character logits
        h = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        return self.head(self.ln(self.blocks(h)))


def batches(ids, idx):
    x = torch.stack([ids[i:i + CONTEXT] for i in idx.tolist()])
    return x, torch.stack([ids[i + 1:i + CONTEXT + 1] for i in idx.tolist()])


def loss_of(model, x, y):
    logits = model(x)
    return nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten()), logits


@torch.no_grad()
def evaluate(model, ids, device, n=512):
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, len(ids) - CONTEXT - 1, (n,), generator=g)
    x, y = (t.to(device) for t in batches(ids, idx))
    loss, logits = loss_of(model, x, y)
    return loss.item(), (logits.argmax(-1) == y).float().mean().item()


def params(model):
    return sum(p.numel() for p in model.parameters())


def time_svds(model, device):
    """ms of the Linear layers' SVDs: one svd_varlen call, and a loop of torch.linalg.svd."""
    ws = [m.weight.detach() for m in model.modules() if isinstance(m, nn.Linear)]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def best(fn):
        fn()
        sync()
        t = []
        for _ in range(5):
            t0 = time.perf_counter()
            fn()
            sync()
            t.append(time.perf_counter() - t0)
        return min(t) * 1e3

    return (best(lambda: torch_jsvd.svd_varlen(ws)),
            best(lambda: [torch.linalg.svd(w, full_matrices=False) for w in ws]))


def plot(rows, base, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    frac = [r["params"] / base["params"] for r in rows]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.6))
    a1.plot(frac, [r["val_loss"] for r in rows], "o-", label="compressed")
    a1.axhline(base["val_loss"], color="gray", ls="--", label="trained model")
    a1.set_xlabel("parameters kept (fraction)")
    a1.set_ylabel("validation loss (nats/char)")
    a1.legend(fontsize=8)
    a2.plot(frac, [r["val_acc"] for r in rows], "o-")
    a2.axhline(base["val_acc"], color="gray", ls="--")
    a2.set_xlabel("parameters kept (fraction)")
    a2.set_ylabel("next-character accuracy")
    for r, f in zip(rows, frac):
        a2.annotate(f"{r['energy']:g}", (f, r["val_acc"]), fontsize=7, xytext=(3, -9), textcoords="offset points")
    fig.suptitle("char-level transformer on the repository's docs: torch_jsvd.compress(model, energy=e)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-s", type=float, default=60.0, help="training time in seconds")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--width", type=int, default=None, help="model width (default 192 on a GPU, 96 on the CPU)")
    ap.add_argument("--depth", type=int, default=None, help="transformer blocks (default 6 on a GPU, 4 on the CPU)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "results"))
    a = ap.parse_args()
    device = torch.device(a.device)
    torch.manual_seed(0)
    ids, vocab = corpus()
    split = int(0.9 * len(ids))
    train_ids, val_ids = ids[:split], ids[split:]
    gpu = device.type == "cuda"
    model = CharTransformer(vocab, a.width or (192 if gpu else 96), a.depth or (6 if gpu else 4)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    t0, step = time.time(), 0
    while time.time() - t0 < a.train_s:
        x, y = (t.to(device) for t in batches(train_ids, torch.randint(0, split - CONTEXT - 1, (64,))))
        loss = loss_of(model, x, y)[0]
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
    model.eval()
    base_loss, base_acc = evaluate(model, val_ids, device)
    base = {"params": params(model), "val_loss": base_loss, "val_acc": base_acc}
    print(f"trained {step} steps in {a.train_s:.0f} s on {device}: {len(ids)} characters, vocabulary {vocab}, "
          f"{base['params']} parameters; validation loss {base_loss:.3f}, accuracy {base_acc:.3f} "
          f"(uniform guessing: loss {math.log(vocab):.2f})")
    ours_ms, loop_ms = time_svds(model, device)
    layers = sum(isinstance(m, nn.Linear) for m in model.modules())
    print(f"SVDs of the {layers} Linear layers: svd_varlen {ours_ms:.2f} ms, loop of torch.linalg.svd {loop_ms:.2f} ms")
    rows = []
    print(f"{'energy':>7} {'replaced':>9} {'ranks':>9} {'params':>9} {'kept':>6} {'val loss':>9} {'val acc':>8} {'max weight err':>15}")
    for energy in (0.99, 0.95, 0.9, 0.8, 0.7, 0.5, 0.3):
        m = copy.deepcopy(model)
        reports = torch_jsvd.compress(m, energy=energy)
        loss, acc = evaluate(m, val_ids, device)
        row = {"energy": energy, "ranks": [r.rank if r.replaced else None for r in reports], "params": params(m),
               "val_loss": loss, "val_acc": acc, "max_rel_weight_error": max(r.rel_error for r in reports)}
        rows.append(row)
        kept = [r for r in row["ranks"] if r is not None]
        span = f"{min(kept)}-{max(kept)}" if kept else "-"
        print(f"{energy:7.2f} {len(kept):4d}/{len(reports):<4d} {span:>9} {row['params']:9d} {row['params'] / base['params']:6.2f} "
              f"{loss:9.3f} {acc:8.3f} {row['max_rel_weight_error']:15.3f}")
    os.makedirs(a.out, exist_ok=True)
    doc = {"device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
           "train_s": a.train_s, "steps": step, "base": base, "rows": rows,
           "svd_ms": {"svd_varlen": ours_ms, "torch_linalg_svd_loop": loop_ms}}
    with open(os.path.join(a.out, "compress_demo.json"), "w") as f:
        json.dump(doc, f, indent=1)
    png = plot(rows, base, os.path.join(a.out, "compress_demo.png"))
    print(f"wrote {os.path.join(a.out, 'compress_demo.json')}" + (f" and {png}" if png else " (no matplotlib: no plot)"))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""PyTorch reference for bench-train-step: the same Transformer shapes, the same step (forward,
label-smoothed cross-entropy, backward, Adam), timed the same way, one JSON line per model.

Runs where PyTorch is installed (the GPU device image has it; the product does not use it):
    python3 bench/train_step_torch.py --device cuda [--dtype float32|bf16] [--models small,base]

The model is torch.nn.Transformer (post-norm, ReLU, dropout 0.1) with tied source, target and
output embeddings scaled by sqrt(d) plus sinusoidal positions, as Tern's "transformer" arch.
torch.nn.Transformer adds a final LayerNorm to the encoder and the decoder stacks, which Tern's
post-norm stack has not: two small normalizations more on PyTorch's side. float32 matrix
products run without TF32 (PyTorch's default for matmul), as Tern's cuBLAS calls do; --dtype bf16
runs the forward under torch.autocast (float32 master weights and Adam state); --dtype fp16 the
same with float16 (the GRU layers' timing needs no loss scaling).

--models gru,gru-wmt time one bidirectional torch.nn.GRU layer alone (cuDNN's on a GPU, with
TF32 off), as bench-train-step's: its input a parameter, the loss the sum of its states, Adam
over all of it; "tokens" are the input's positions. torch.nn.GRU adds a bias inside the reset
gate's product (b_hn) that the Nematus GRU has not: d values more, the same FLOPs.
"""
import argparse
import json
import math
import statistics
import time

import torch
from torch import nn

SHAPES = {  # name: (dim, ffn, heads, depth, vocab, batch, src_len, tgt_len), as bench-train-step
    "small": ("bible-small", 256, 1024, 4, 3, 8000, 64, 40, 40),
    "base": ("transformer-base", 512, 2048, 8, 6, 32000, 64, 32, 32),
    # One bidirectional GRU layer, dim inputs -> ffn states (heads, depth and vocab unused).
    "gru": ("gru-256", 256, 256, 0, 1, 0, 64, 40, 40),
    "gru-wmt": ("gru-1024", 512, 1024, 0, 1, 0, 80, 50, 50),
}


class Seq2Seq(nn.Module):
    def __init__(self, dim, ffn, heads, depth, vocab, max_len=512):
        super().__init__()
        self.dim = dim
        self.emb = nn.Embedding(vocab, dim)
        nn.init.xavier_uniform_(self.emb.weight)
        self.core = nn.Transformer(d_model=dim, nhead=heads, num_encoder_layers=depth,
                                   num_decoder_layers=depth, dim_feedforward=ffn, dropout=0.1,
                                   activation="relu", batch_first=True, norm_first=False)
        pos = torch.arange(max_len).unsqueeze(1)
        half = dim // 2
        step = math.log(10000.0) / max(half - 1, 1)
        angles = pos * torch.exp(-step * torch.arange(half)).unsqueeze(0)
        self.register_buffer("pe", torch.cat([angles.sin(), angles.cos()], dim=1))

    def embed(self, ids):
        return self.emb(ids) * math.sqrt(self.dim) + self.pe[: ids.shape[1]]

    def forward(self, src, tgt_in):
        causal = self.core.generate_square_subsequent_mask(tgt_in.shape[1], device=src.device)
        h = self.core(self.embed(src), self.embed(tgt_in), tgt_mask=causal, tgt_is_causal=True)
        return h @ self.emb.weight.t()  # tied output layer


def bench(key, device, dtype, steps, windows, batch_override):
    name, dim, ffn, heads, depth, vocab, batch, src_len, tgt_len = SHAPES[key]
    batch = batch_override or batch
    torch.manual_seed(1)
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(dtype)
    autocast = torch.autocast(device_type=device, dtype=low or torch.float32, enabled=low is not None)
    if key.startswith("gru"):
        model = nn.GRU(dim, ffn, num_layers=depth, bidirectional=True).to(device)
        x = nn.Parameter(torch.randn(src_len, batch, dim, device=device))
        adam = torch.optim.Adam(list(model.parameters()) + [x], lr=1e-4)
        tokens = batch * src_len

        def step():
            adam.zero_grad(set_to_none=True)
            with autocast:
                states, _ = model(x)
            states.float().sum().div(tokens).backward()
            adam.step()
    else:
        model = Seq2Seq(dim, ffn, heads, depth, vocab).to(device)
        adam = torch.optim.Adam(model.parameters(), lr=1e-4)
        loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
        src = torch.randint(4, vocab, (batch, src_len), device=device)
        tgt_in = torch.randint(4, vocab, (batch, tgt_len), device=device)
        tgt_out = torch.randint(4, vocab, (batch, tgt_len), device=device)
        tokens = batch * tgt_len

        def step():
            adam.zero_grad(set_to_none=True)
            with autocast:
                logits = model(src, tgt_in)
            loss = loss_fn(logits.float().view(-1, vocab), tgt_out.view(-1))
            loss.backward()
            adam.step()

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    model.train()
    step()
    step()
    sync()
    window_seconds = []
    for _ in range(windows):
        start = time.perf_counter()
        for _ in range(steps):
            step()
        sync()
        window_seconds.append((time.perf_counter() - start) / steps)
    seconds = statistics.median(window_seconds)
    print(json.dumps({"bench": "train_step_torch", "device": device, "dtype": dtype,
                      "torch": torch.__version__,
                      "cudnn": torch.backends.cudnn.version() if device == "cuda" else None,
                      "model": name, "batch": batch,
                      "src_len": src_len, "tgt_len": tgt_len, "vocab": vocab,
                      "step_seconds": round(seconds, 5),
                      "target_tokens_per_s": round(tokens / seconds, 1), "windows": windows,
                      "window_tokens_per_s": [round(tokens / w, 1) for w in window_seconds]}),
          flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bf16", "fp16"])
    parser.add_argument("--models", default="small,base")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per window")
    parser.add_argument("--windows", type=int, default=1,
                        help="timed windows; the median window is reported, as bench-train-step")
    parser.add_argument("--batch", type=int, default=0, help="sentences per batch (0: 64)")
    args = parser.parse_args()
    if args.steps < 1 or args.windows < 1:
        raise SystemExit("train_step_torch.py: --steps and --windows must be at least 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("train_step_torch.py: --device cuda: no CUDA GPU visible")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for key in args.models.split(","):
        if key not in SHAPES:
            raise SystemExit(f"train_step_torch.py: unknown model '{key}' ({', '.join(SHAPES)})")
        bench(key, args.device, args.dtype, args.steps, args.windows, args.batch)


if __name__ == "__main__":
    main()

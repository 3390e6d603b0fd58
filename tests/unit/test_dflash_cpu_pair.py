"""The committed DFlash pair of the real-vLLM tier (tests/real_vllm/dflash_pair/) has the files,
config fields, weight names and shapes that its command produces:

    python3 benchmarks/dflash_trained/train.py --tok tok --out OUT --size cpu \
      --target-secs 90 --draft-secs 90 --drafters dflash-cpu:512:8 --bulk-max-mb 30

(the cpu size of train.py: a Qwen3 target of 4 layers x 128, 2 heads (1 KV) x 64, MLP 384, vocab
8192; one DFlash drafter of 1 layer, block 8 (K = 7), taps after target layers 0, 1 and 3, mask
token 3). The safetensors headers are read as JSON: no torch needed.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

PAIR = Path(__file__).resolve().parents[1] / "real_vllm" / "dflash_pair"
VOCAB, HIDDEN, INTER, HEADS, KV, HEAD_DIM = 8192, 128, 384, 2, 1, 64
TARGET_LAYERS, DRAFT_LAYERS, TAPS, BLOCK, MASK = 4, 1, [0, 1, 3], 8, 3
MAX_BYTES = 16 * 1024 * 1024


def header(path: Path) -> dict[str, tuple[str, list[int]]]:
    """A safetensors file's tensors: name -> (dtype, shape)."""
    with path.open("rb") as fh:
        (size,) = struct.unpack("<Q", fh.read(8))
        meta = json.loads(fh.read(size))
    return {k: (v["dtype"], v["shape"]) for k, v in meta.items() if k != "__metadata__"}


def layer(prefix: str) -> dict[str, list[int]]:
    """The weights of one Qwen3 decoder layer, as both the target and the drafter name them."""
    return {
        f"{prefix}.self_attn.q_proj.weight": [HEADS * HEAD_DIM, HIDDEN],
        f"{prefix}.self_attn.k_proj.weight": [KV * HEAD_DIM, HIDDEN],
        f"{prefix}.self_attn.v_proj.weight": [KV * HEAD_DIM, HIDDEN],
        f"{prefix}.self_attn.o_proj.weight": [HIDDEN, HEADS * HEAD_DIM],
        f"{prefix}.self_attn.q_norm.weight": [HEAD_DIM],
        f"{prefix}.self_attn.k_norm.weight": [HEAD_DIM],
        f"{prefix}.mlp.gate_proj.weight": [INTER, HIDDEN],
        f"{prefix}.mlp.up_proj.weight": [INTER, HIDDEN],
        f"{prefix}.mlp.down_proj.weight": [HIDDEN, INTER],
        f"{prefix}.input_layernorm.weight": [HIDDEN],
        f"{prefix}.post_attention_layernorm.weight": [HIDDEN],
    }


def test_the_pair_fits_the_size_limit() -> None:
    total = sum(f.stat().st_size for f in PAIR.rglob("*") if f.is_file())
    assert total <= MAX_BYTES, total


def test_target_config_and_weights() -> None:
    cfg = json.loads((PAIR / "target" / "config.json").read_text())
    assert cfg["architectures"] == ["Qwen3ForCausalLM"]
    assert (cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"]) == (
        VOCAB,
        HIDDEN,
        INTER,
    )
    assert (cfg["num_hidden_layers"], cfg["num_attention_heads"]) == (TARGET_LAYERS, HEADS)
    assert (cfg["num_key_value_heads"], cfg["head_dim"]) == (KV, HEAD_DIM)
    assert cfg["tie_word_embeddings"] is False
    want = {"model.embed_tokens.weight": [VOCAB, HIDDEN], "lm_head.weight": [VOCAB, HIDDEN]}
    want["model.norm.weight"] = [HIDDEN]
    for i in range(TARGET_LAYERS):
        want |= layer(f"model.layers.{i}")
    got = header(PAIR / "target" / "model.safetensors")
    assert {k: shape for k, (_, shape) in got.items()} == want
    assert {dtype for dtype, _ in got.values()} == {"BF16"}


def test_drafter_is_in_vllms_dflash_layout() -> None:
    cfg = json.loads((PAIR / "dflash" / "config.json").read_text())
    assert cfg["architectures"] == ["DFlashDraftModel"]
    assert cfg["model_type"] == "qwen3"
    assert cfg["block_size"] == BLOCK
    assert cfg["dflash_config"] == {"mask_token_id": MASK, "target_layer_ids": TAPS}
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], cfg["head_dim"]) == (
        HIDDEN,
        DRAFT_LAYERS,
        HEAD_DIM,
    )
    want = {"fc.weight": [HIDDEN, HIDDEN * len(TAPS)], "hidden_norm.weight": [HIDDEN]}
    want["norm.weight"] = [HIDDEN]
    for i in range(DRAFT_LAYERS):
        want |= layer(f"layers.{i}")
    got = header(PAIR / "dflash" / "model.safetensors")
    # no embed_tokens or lm_head: vLLM shares the target's
    assert {k: shape for k, (_, shape) in got.items()} == want
    assert {dtype for dtype, _ in got.values()} == {"BF16"}


def test_both_carry_the_tokenizer_with_the_mask_token() -> None:
    for part in ("target", "dflash"):
        tok = json.loads((PAIR / part / "tokenizer.json").read_text())
        specials = {t["content"]: t["id"] for t in tok["added_tokens"]}
        assert specials == {
            "<|endoftext|>": 0,
            "<|im_start|>": 1,
            "<|im_end|>": 2,
            "<|mask|>": MASK,
        }
        assert len(tok["model"]["vocab"]) == VOCAB

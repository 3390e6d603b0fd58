"""Make tiny random-weight models for vLLM speculative-decoding smoke tests, with no hub access.

Writes, under OUT (default ./tiny):
  target/   Qwen3ForCausalLM, 4 layers, hidden 512, vocab 4096 (+ tokenizer, chat template)
  dflash/   DFlashDraftModel (vLLM's qwen3_dflash layout): 1 layer, fc, hidden_norm, norm;
            dflash_config {mask_token_id, target_layer_ids}
  eagle3/   LlamaForCausalLMEagle3 (vLLM's llama_eagle3 layout): 1 layer (midlayer.*), fc, norm,
            lm_head
  draft/    Qwen3ForCausalLM, 2 layers, same tokenizer (for method=draft_model)

--weights none   : configs + tokenizer only (use vLLM --load-format dummy)
--weights random : also model.safetensors with small random weights

Needs: tokenizers, transformers, safetensors, torch (all preinstalled on the GPU machine).
"""

import argparse
import glob
import json
import os
import shutil

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

VOCAB = 4096
HID, INTER, HEADS, KV, HD = 512, 1024, 4, 2, 128
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def dump_json(obj, path, **kw):
    with open(path, "w") as f:
        json.dump(obj, f, **kw)


def corpus_files():
    import sysconfig

    std = sysconfig.get_paths()["stdlib"]
    files = sorted(glob.glob(os.path.join(std, "*.py")))
    return files[:200]


def make_tokenizer(out):
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIALS,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train(corpus_files(), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def qwen3_config(layers, vocab):
    return Qwen3Config(
        vocab_size=vocab,
        hidden_size=HID,
        intermediate_size=INTER,
        num_hidden_layers=layers,
        num_attention_heads=HEADS,
        num_key_value_heads=KV,
        head_dim=HD,
        max_position_embeddings=16384,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        dtype="bfloat16",
        eos_token_id=None,
        bos_token_id=None,
        pad_token_id=None,
    )


def rnd(*shape):
    return (torch.randn(*shape) * 0.02).to(torch.bfloat16)


def layer_weights(prefix, qkv_in):
    w = {
        f"{prefix}.self_attn.q_proj.weight": rnd(HEADS * HD, qkv_in),
        f"{prefix}.self_attn.k_proj.weight": rnd(KV * HD, qkv_in),
        f"{prefix}.self_attn.v_proj.weight": rnd(KV * HD, qkv_in),
        f"{prefix}.self_attn.o_proj.weight": rnd(HID, HEADS * HD),
        f"{prefix}.mlp.gate_proj.weight": rnd(INTER, HID),
        f"{prefix}.mlp.up_proj.weight": rnd(INTER, HID),
        f"{prefix}.mlp.down_proj.weight": rnd(HID, INTER),
        f"{prefix}.input_layernorm.weight": torch.ones(HID, dtype=torch.bfloat16),
        f"{prefix}.post_attention_layernorm.weight": torch.ones(HID, dtype=torch.bfloat16),
    }
    return w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tiny")
    ap.add_argument("--weights", choices=["none", "random"], default="none")
    a = ap.parse_args()
    torch.manual_seed(0)
    tdir = os.path.join(a.out, "target")
    os.makedirs(tdir, exist_ok=True)
    fast = make_tokenizer(tdir)
    vocab = len(fast)
    assert vocab <= VOCAB, vocab
    eos = fast.convert_tokens_to_ids("<|im_end|>")
    mask_id = fast.convert_tokens_to_ids("<|mask|>")

    # target
    cfg = qwen3_config(4, VOCAB)
    cfg.eos_token_id = eos
    cfg.architectures = ["Qwen3ForCausalLM"]
    if a.weights == "random":
        Qwen3ForCausalLM(cfg).to(torch.bfloat16).save_pretrained(tdir)
    else:
        cfg.save_pretrained(tdir)
    dump_json(
        {"eos_token_id": eos, "max_new_tokens": 256},
        os.path.join(tdir, "generation_config.json"),
    )

    def copy_tok(d):
        for f in os.listdir(tdir):
            if f.startswith("tokenizer") or f in ("special_tokens_map.json", "chat_template.jinja"):
                shutil.copy(os.path.join(tdir, f), d)

    # draft_model drafter: same arch, 2 layers
    ddir = os.path.join(a.out, "draft")
    os.makedirs(ddir, exist_ok=True)
    dcfg = qwen3_config(2, VOCAB)
    dcfg.eos_token_id = eos
    dcfg.architectures = ["Qwen3ForCausalLM"]
    if a.weights == "random":
        Qwen3ForCausalLM(dcfg).to(torch.bfloat16).save_pretrained(ddir)
    else:
        dcfg.save_pretrained(ddir)
    copy_tok(ddir)

    # DFlash drafter (z-lab layout: architectures DFlashDraftModel, model_type qwen3)
    fdir = os.path.join(a.out, "dflash")
    os.makedirs(fdir, exist_ok=True)
    fcfg = qwen3_config(1, VOCAB).to_dict()
    target_layer_ids = [0, 2]  # vLLM taps target layers i+1 -> (1, 3): must be < 4
    fcfg.update(
        {
            "architectures": ["DFlashDraftModel"],
            "model_type": "qwen3",
            "block_size": 4,
            "dflash_config": {"mask_token_id": mask_id, "target_layer_ids": target_layer_ids},
            "eos_token_id": eos,
        }
    )
    dump_json(fcfg, os.path.join(fdir, "config.json"), indent=2)
    if a.weights == "random":
        w = layer_weights("layers.0", HID)
        w["layers.0.self_attn.q_norm.weight"] = torch.ones(HD, dtype=torch.bfloat16)
        w["layers.0.self_attn.k_norm.weight"] = torch.ones(HD, dtype=torch.bfloat16)
        w["fc.weight"] = rnd(HID, HID * len(target_layer_ids))
        w["hidden_norm.weight"] = torch.ones(HID, dtype=torch.bfloat16)
        w["norm.weight"] = torch.ones(HID, dtype=torch.bfloat16)
        save_file(w, os.path.join(fdir, "model.safetensors"), metadata={"format": "pt"})
    copy_tok(fdir)

    # EAGLE-3 drafter (llama layout, 1 layer called midlayer, qkv input = 2*hidden)
    edir = os.path.join(a.out, "eagle3")
    os.makedirs(edir, exist_ok=True)
    ecfg = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": HID,
        "intermediate_size": INTER,
        "num_hidden_layers": 1,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV,
        "head_dim": HD,
        "hidden_act": "silu",
        "max_position_embeddings": 16384,
        "rms_norm_eps": 1e-6,
        "vocab_size": VOCAB,
        "draft_vocab_size": VOCAB,
        "target_hidden_size": HID,
        "eagle_aux_hidden_state_layer_ids": [1, 2, 3],
        "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "dtype": "bfloat16",
        "eos_token_id": eos,
    }
    dump_json(ecfg, os.path.join(edir, "config.json"), indent=2)
    if a.weights == "random":
        w = layer_weights("midlayer", 2 * HID)
        w["midlayer.hidden_norm.weight"] = torch.ones(HID, dtype=torch.bfloat16)
        w["fc.weight"] = rnd(HID, 3 * HID)
        w["norm.weight"] = torch.ones(HID, dtype=torch.bfloat16)
        w["lm_head.weight"] = rnd(VOCAB, HID)
        save_file(w, os.path.join(edir, "model.safetensors"), metadata={"format": "pt"})
    copy_tok(edir)
    print("vocab", vocab, "eos", eos, "mask", mask_id, "->", os.path.abspath(a.out))


if __name__ == "__main__":
    main()

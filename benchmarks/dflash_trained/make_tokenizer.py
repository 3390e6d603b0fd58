#!/usr/bin/env python3
"""Train the byte-level BPE tokenizer of the trained DFlash pair (see README.md here).

Trained on this machine's Python standard-library sources, saved as a Hugging Face fast tokenizer
(tokenizer.json + tokenizer_config.json) that vLLM and transformers load offline. Special tokens,
in this order, so their ids are fixed: <|endoftext|> = 0 (EOS and padding), <|im_start|> = 1,
<|im_end|> = 2 (reserved), <|mask|> = 3 (the DFlash mask token the drafter's block is
filled with).

usage: make_tokenizer.py OUT_DIR [--vocab 8192] [--max-files N]
"""

from __future__ import annotations

import argparse
import glob
import os
import sysconfig
import time

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>")
# The target is a plain language model of Python source (never trained on chats): the template
# passes the messages' text through, so a chat request (specmon chat, specmon bench) continues
# the text exactly as a completion request of the same text would.
CHAT_TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def stdlib_files(limit: int | None = None) -> list[str]:
    """The standard library's .py files (site-packages excluded) that read as UTF-8, sorted."""
    root = sysconfig.get_paths()["stdlib"]
    out = []
    for f in sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True)):
        if "site-packages" in f:
            continue
        try:
            with open(f, encoding="utf-8") as fh:
                fh.read()
        except (OSError, UnicodeDecodeError):
            continue
        out.append(f)
    return out[:limit] if limit else out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--max-files", type=int, default=0, help="0: every file")
    a = ap.parse_args()
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    files = stdlib_files(a.max_files or None)
    t0 = time.time()
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=a.vocab,
        special_tokens=list(SPECIALS),
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train(files, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=SPECIALS[0],
        pad_token=SPECIALS[0],
        mask_token=SPECIALS[3],
        bos_token=None,
        unk_token=None,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(a.out)
    ids = {s: fast.convert_tokens_to_ids(s) for s in SPECIALS}
    assert list(ids.values()) == [0, 1, 2, 3], ids
    print(f"{len(files)} files, vocab {len(fast)}, {time.time() - t0:.1f} s, specials {ids}")


if __name__ == "__main__":
    main()

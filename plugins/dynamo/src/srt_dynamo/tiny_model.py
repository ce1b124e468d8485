"""A tiny, fully local model directory for Dynamo's mocker and frontend.

    python -m srt_dynamo.tiny_model OUTDIR [--name NAME]


Nothing is downloaded: a byte-level BPE tokenizer is trained on a few fixed sentences with
``tokenizers`` (about 0.2 s, deterministic), and the JSON files Dynamo reads are written
beside it. There are no weights: the mocker reads only ``config.json`` (for the KV bytes per
token) and the tokenizer; the frontend gets the same files from the model card the worker
registers. Its keys carry ``num_hidden_layers``, ``num_attention_heads`` and
``hidden_size``, so the mocker never imports transformers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "Hello, world! This is a tiny tokenizer for testing Dynamo.",
    "The quick brown fox jumps over the lazy dog.",
    "A mocker worker simulates a vLLM engine without a GPU.",
    "The frontend serves an OpenAI compatible API on HTTP.",
    "Requests travel over TCP or NATS; discovery lives in etcd.",
    "system user assistant: what is two plus two? Four.",
    "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ",
] * 4

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def build(outdir: str, name: str) -> None:
    """Write the model directory ``outdir``; single-threaded training keeps it reproducible."""
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    os.environ.setdefault("RAYON_RS_NUM_CPUS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    except ImportError:  # installed with Dynamo's dependencies (requirements-dynamo.txt)
        raise SystemExit(
            "the tiny model needs the tokenizers package: pip install tokenizers"
        ) from None

    os.makedirs(outdir, exist_ok=True)

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        min_frequency=1,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer=trainer)
    vocab_size = tok.get_vocab_size()
    eos_id = tok.token_to_id("<|im_end|>")
    bos_id = tok.token_to_id("<|endoftext|>")
    tok.save(os.path.join(outdir, "tokenizer.json"))

    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "_name_or_path": name,
        "vocab_size": vocab_size,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "pad_token_id": bos_id,
        "tie_word_embeddings": True,
        "torch_dtype": "float16",
        "dtype": "float16",
        "transformers_version": "4.56.0",
    }
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 4096,
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {
            str(tok.token_to_id(t)): {
                "content": t,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }
            for t in SPECIAL
        },
    }
    generation_config = {
        "bos_token_id": bos_id,
        "eos_token_id": [eos_id, bos_id],
        "max_new_tokens": 64,
        "transformers_version": "4.56.0",
    }
    special_tokens_map = {
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
    }
    for fname, obj in [
        ("config.json", config),
        ("tokenizer_config.json", tokenizer_config),
        ("generation_config.json", generation_config),
        ("special_tokens_map.json", special_tokens_map),
    ]:
        with open(os.path.join(outdir, fname), "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2, sort_keys=True)
            f.write("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build a tiny local model for Dynamo's mocker.")
    parser.add_argument("outdir", help="directory to write (created if missing)")
    parser.add_argument("--name", default="tiny", help="the model's _name_or_path")
    args = parser.parse_args(argv)
    build(args.outdir, args.name)
    print(args.outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""mlx-lm's own Qwen2 model on the weights of an F16 GGUF: decode speed (tg) at 4 and 8 bits.

Loads the GGUF's tensors with MLX's own GGUF reader (mx.load), maps llama.cpp's
tensor names to mlx-lm's (Hugging Face) names, builds mlx_lm.models.qwen2.Model,
quantizes it with mlx-lm's nn.quantize (affine, group 64), then times N greedy
decode steps of mlx-lm's generate_step after a one-token prompt (BOS), the same
work as memwall's tg N. Prints one JSON line per run: {"bits", "n_gen", "tg_tps"}.

usage: vs_mlx_lm.py MODEL-F16.gguf BITS N
"""
import json
import sys
import time

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.generate import generate_step
from mlx_lm.models import qwen2


def load(path):
    w, meta = mx.load(path, return_metadata=True)
    g = lambda k: meta[k].item() if hasattr(meta[k], "item") else meta[k]
    n_layer = int(g("qwen2.block_count"))
    args = qwen2.ModelArgs(
        model_type="qwen2",
        hidden_size=int(g("qwen2.embedding_length")),
        num_hidden_layers=n_layer,
        intermediate_size=int(g("qwen2.feed_forward_length")),
        num_attention_heads=int(g("qwen2.attention.head_count")),
        num_key_value_heads=int(g("qwen2.attention.head_count_kv")),
        rms_norm_eps=float(g("qwen2.attention.layer_norm_rms_epsilon")),
        vocab_size=w["token_embd.weight"].shape[0],
        rope_theta=float(g("qwen2.rope.freq_base")),
        tie_word_embeddings="output.weight" not in w,
    )
    names = {
        "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    }
    hf = {}
    for k, v in w.items():
        if k == "token_embd.weight":
            hf["model.embed_tokens.weight"] = v
        elif k == "output_norm.weight":
            hf["model.norm.weight"] = v
        elif k == "output.weight":
            hf["lm_head.weight"] = v
        else:
            _, i, name, kind = k.split(".")
            hf[f"model.layers.{i}.{names[name]}.{kind}"] = v
    model = qwen2.Model(args)
    model.load_weights(list(hf.items()), strict=True)
    return model, int(g("tokenizer.ggml.bos_token_id")) if "tokenizer.ggml.bos_token_id" in meta else 0


def main():
    path, bits, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    model, bos = load(path)
    if bits in (4, 8):
        nn.quantize(model, group_size=64, bits=bits)
    mx.eval(model.parameters())
    prompt = mx.array([bos])
    # Warm-up.
    for _, _ in zip(range(8), generate_step(prompt, model, max_tokens=8)):
        pass
    t0 = None
    count = 0
    for i, (tok, _) in enumerate(generate_step(prompt, model, max_tokens=n + 1)):
        if i == 0:
            t0 = time.perf_counter()  # the prompt's own step is not a decode step
            continue
        count += 1
    dt = time.perf_counter() - t0
    print(json.dumps({"bits": bits, "n_gen": count, "tg_tps": count / dt}))


if __name__ == "__main__":
    main()

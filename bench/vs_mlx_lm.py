"""mlx-lm's own Qwen2 model on the weights of an F16 GGUF: decode speed (tg) at 4 and 8 bits.

Loads the GGUF's tensors with MLX's own GGUF reader (mx.load), maps llama.cpp's
tensor names to mlx-lm's (Hugging Face) names, builds mlx_lm.models.qwen2.Model,
quantizes it with mlx-lm's nn.quantize (affine, group 64), then times N greedy
decode steps of mlx-lm's generate_step after a one-token prompt (BOS), the same
work as memwall's tg N. Then times N steps of the same model in a synchronous loop,
as memwall's bench (and llama-bench) steps: one token in, the step's logits evaluated
and copied to the host as f32, the next token drawn at random, nothing overlapped.
generate_step instead builds step t + 1's graph while the device runs step t
(mx.async_eval) and keeps the argmax on the device. Prints one JSON line per run:
{"bits", "n_gen", "tg_tps" (generate_step), "tg_tps_sync" (the synchronous loop)}.

usage: vs_mlx_lm.py MODEL-F16.gguf BITS N
"""
import json
import os
import random
import sys
import time

import numpy as np

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.generate import generate_step
from mlx_lm.models import qwen2
from mlx_lm.models.cache import make_prompt_cache


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
    if os.environ.get("MLX_LM_DTYPE", "f32") == "f16":
        # As mlx_lm.convert holds a model: every float tensor in the model's dtype. The
        # GGUF keeps norms and biases in f32, which would promote the activations to f32.
        hf = {k: v.astype(mx.float16) if v.dtype == mx.float32 else v for k, v in hf.items()}
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
    # The synchronous loop (the one-token prompt first, not timed).
    cache = make_prompt_cache(model)
    mx.eval(model(prompt[None], cache=cache))
    rng = random.Random(1)
    toks = [rng.randrange(model.args.vocab_size) for _ in range(n)]
    t1 = time.perf_counter()
    for t in toks:
        logits = model(mx.array([[t]]), cache=cache)[0, -1].astype(mx.float32)
        np.asarray(logits)
    dt_sync = time.perf_counter() - t1
    print(json.dumps({"bits": bits, "n_gen": count, "tg_tps": count / dt, "tg_tps_sync": n / dt_sync}))


if __name__ == "__main__":
    main()

"""llama.cpp's figures on a GGUF file, for benches/gguf_sizes.rs (issue 22, requirement 7) and
benches/moe_sizes.rs (issue 43, requirement 6).

    python benches/llama_cpp_anchor.py FILE.gguf TOKENS GENERATE THREADS

Needs llama-cpp-python built from source with pip (a benchmark anchor only; attnviz never
depends on it). From the repository root, into .cache/venv-llama, where the benches look for it
(`LLAMA_PYTHON` names another interpreter); the build fetches cmake itself, about 35 minutes on
two busy cores:
    python3 -m venv .cache/venv-llama
    CMAKE_BUILD_PARALLEL_LEVEL=2 .cache/venv-llama/bin/pip install llama-cpp-python==0.3.36

On the development VM (an Intel Xeon with AMX), that native build (`AMX_INT8 = 1` in its
system info) died with SIGSEGV in its first evaluation, every time; the same source built with
every other extension the CPU has and AMX off runs, and is the anchor measured:
    CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON \
        -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AVX512_VNNI=ON \
        -DGGML_AVX512_VBMI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON -DGGML_AMX_TILE=OFF \
        -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" \
        .cache/venv-llama/bin/pip install --no-cache-dir llama-cpp-python==0.3.36
On the Zen 4 VM (AMD EPYC, AVX-512 with VNNI and BF16, no AMX) the plain native build runs, and
knows the `gpt-oss` and `olmoe` architectures (7 December 2026).

The same prompt text as the Rust side (common words, one token each, cut to TOKENS tokens by
the file's own tokenizer), evaluated once without any attention captured (llama.cpp cannot
give it), then GENERATE tokens greedily after the first 32 prompt tokens. Prints one line:
load s, prompt wall s, prompt CPU s, prompt tokens, generation wall s, generation CPU s,
tokens generated, peak RSS bytes.
"""

import os
import resource
import sys
import time

from llama_cpp import Llama

WORDS = ["the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be",
         "by", "on", "not"]


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    path, tokens, generate, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    t0 = time.time()
    llm = Llama(model_path=path, n_ctx=tokens + generate + 64, n_batch=tokens, n_ubatch=tokens,
                n_threads=threads, n_threads_batch=threads, verbose=False, use_mmap=True)
    load = time.time() - t0
    text, i = "", 0
    while True:
        nxt = WORDS[0] if not text else f"{text} {WORDS[(i * 7 + i // 16) % 16]}"
        n = len(llm.tokenize(nxt.encode(), add_bos=False))
        if n > tokens:
            break
        text, i = nxt, i + 1
        if n == tokens:
            break
    ids = llm.tokenize(text.encode(), add_bos=False)
    w, c = time.time(), cpu()
    llm.reset()
    llm.eval(ids)
    prompt_wall, prompt_cpu = time.time() - w, cpu() - c
    llm.reset()
    head = ids[:32]
    w, c = time.time(), cpu()
    llm.eval(head)
    made = 0
    for _ in range(generate):
        tok = llm.sample(temp=0.0)
        llm.eval([tok])
        made += 1
    gen_wall, gen_cpu = time.time() - w, cpu() - c
    # The 32-token prompt is part of the generation time on both sides (attnviz's `generate`
    # runs it as its first step too).
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(load, prompt_wall, prompt_cpu, len(ids), gen_wall, gen_cpu, made, peak)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", sys.argv[4] if len(sys.argv) > 4 else "2")
    main()

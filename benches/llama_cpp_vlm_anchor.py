"""llama.cpp's multimodal prompt time on a text GGUF + projector pair, for benches/vlm.rs (issue
42, requirement 6).

    python benches/llama_cpp_vlm_anchor.py TEXT.gguf MMPROJ.gguf IMAGE TOKENS THREADS

Needs llama-cpp-python built from source (a benchmark anchor only; attnviz never depends on it),
as benches/llama_cpp_anchor.py says, into .cache/venv-llama. Its `llama_cpp.mtmd_cpp` binds
llama.cpp's multimodal library (libmtmd, the code of `llama-mtmd-cli`), which reads the
`gemma3` and `idefics3` projector types among others; this script calls it directly, as
`MTMDChatHandler` does, without a chat template.

The prompt is the picture's marker followed by common words, one token each, cut to TOKENS
tokens by the file's own tokenizer (the rule of benches/gguf_sizes.rs, which the attnviz side
uses too). Timed, from the picture file to the last logits: the picture read and prepared,
`mtmd_tokenize` (the text tokens and the picture's chunks), and `mtmd_helper_eval_chunks` (the
vision tower and projector on every tile, then the language model over the whole sequence, in
batches of 2048 tokens and micro-batches of 512, llama-mtmd-cli's defaults). No attention is
captured (llama.cpp cannot give it).

Prints one line: load s, prompt wall s, prompt CPU s, tokens in the sequence (text and
picture), peak RSS bytes.
"""

import ctypes
import os
import resource
import sys
import time

WORDS = ["the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be",
         "by", "on", "not"]


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def prompt_text(count, tokens):
    """Common words, one token each, cut to `tokens` tokens by `count` (the tokenizer)."""
    text, i = "", 0
    while True:
        nxt = WORDS[0] if not text else f"{text} {WORDS[(i * 7 + i // 16) % 16]}"
        n = count(nxt)
        if n > tokens:
            return text
        text, i = nxt, i + 1
        if n == tokens:
            return text


def main():
    text_path, mmproj_path, image, tokens, threads = sys.argv[1:6]
    tokens, threads = int(tokens), int(threads)
    import llama_cpp
    import llama_cpp.mtmd_cpp as mtmd
    from llama_cpp import Llama

    t0 = time.time()
    # llama-mtmd-cli's defaults: batches of 2048 tokens, micro-batches of 512.
    batch = 2048
    llm = Llama(model_path=text_path, n_ctx=4096, n_batch=batch, n_ubatch=512,
                n_threads=threads, n_threads_batch=threads, verbose=False, use_mmap=True)
    params = mtmd.mtmd_context_params_default()
    params.use_gpu = False
    params.print_timings = False
    params.n_threads = threads
    params.warmup = False
    ctx = mtmd.mtmd_init_from_file(mmproj_path.encode(), llm.model, params)
    if not ctx:
        sys.exit(f"llama.cpp could not open the projector {mmproj_path}")
    load = time.time() - t0

    words = prompt_text(lambda s: len(llm.tokenize(s.encode(), add_bos=False)), tokens)
    marker = mtmd.mtmd_default_marker().decode()
    w, c = time.time(), cpu()
    bitmap = mtmd.mtmd_helper_bitmap_init_from_file(ctx, image.encode(), False)
    if not bitmap:
        sys.exit(f"llama.cpp could not read the picture {image}")
    chunks = mtmd.mtmd_input_chunks_init()
    inp = mtmd.mtmd_input_text()
    raw = f"{marker}{words}".encode()
    inp.text = raw
    inp.text_len = len(raw)
    inp.add_special = True
    inp.parse_special = True
    bitmaps = (mtmd.mtmd_bitmap_p_ctypes * 1)(bitmap)
    rc = mtmd.mtmd_tokenize(ctx, chunks, ctypes.byref(inp), bitmaps, 1)
    if rc != 0:
        sys.exit(f"mtmd_tokenize failed ({rc})")
    n = mtmd.mtmd_helper_get_n_tokens(chunks)
    new_past = llama_cpp.llama_pos(0)
    rc = mtmd.mtmd_helper_eval_chunks(ctx, llm._ctx.ctx, chunks, 0, 0, batch, True,
                                      ctypes.byref(new_past))
    if rc != 0:
        sys.exit(f"mtmd_helper_eval_chunks failed ({rc})")
    prompt_wall, prompt_cpu = time.time() - w, cpu() - c
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(load, prompt_wall, prompt_cpu, n, peak, flush=True)
    # Freed here, not by the interpreter's exit (the order ctypes would pick can crash).
    mtmd.mtmd_input_chunks_free(chunks)
    mtmd.mtmd_bitmap_free(bitmap)
    mtmd.mtmd_free(ctx)


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__.split("\n\n")[1])
    os.environ.setdefault("OMP_NUM_THREADS", sys.argv[5])
    main()

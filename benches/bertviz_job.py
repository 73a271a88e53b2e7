#!/usr/bin/env python3
"""The Python anchor for attnviz's end-to-end figure: what a user of transformers + bertviz runs
to get the same attention views for one sentence.

    python3 benches/bertviz_job.py MODEL_DIR "sentence" OUT_DIR

Loads the tokenizer and model (eager attention, output_attentions), runs the sentence, and writes
bertviz's head_view and model_view HTML into OUT_DIR. `cargo bench --bench engine` times it and
reads its peak memory. Without bertviz (`pip install bertviz`) it stops after the forward pass,
writes the attention as JSON instead, and says so on stderr (exit status 3), so the figure can be
labelled "transformers only".
"""
import json
import os
import sys


def main():
    model_dir, sentence, out_dir = sys.argv[1:4]
    import torch
    from transformers import AutoModel, AutoTokenizer

    try:
        from bertviz import head_view, model_view
    except ImportError:
        head_view = model_view = None

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir, attn_implementation="eager", output_attentions=True)
    inputs = tokenizer(sentence, return_tensors="pt")
    with torch.no_grad():
        outputs = model(**inputs)
    attention = outputs.attentions  # bertviz's README uses outputs[-1], which breaks on transformers 5
    tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])
    if head_view is None:
        with open(os.path.join(out_dir, "attention.json"), "w") as f:
            json.dump([a[0].tolist() for a in attention], f)
        print("bertviz not installed: wrote the attention as JSON instead", file=sys.stderr)
        sys.exit(3)
    for name, view in (("head_view.html", head_view), ("model_view.html", model_view)):
        html = view(attention, tokens, html_action="return")
        with open(os.path.join(out_dir, name), "w") as f:
            f.write(html.data)


if __name__ == "__main__":
    main()

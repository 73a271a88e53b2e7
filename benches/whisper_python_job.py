#!/usr/bin/env python3
"""The Python job a user writes today to see which part of a recording each word was read from
(issue 44, requirement 7): transformers with eager attention, `generate(output_attentions=True)`
(the encoder's, the decoder's and the cross-attention of every layer), then the alignment heads'
cross-attention of each generated token drawn over the log-mel spectrogram with matplotlib, as
the answers to whisper-timestamped's and bertviz's questions do.

    python3 benches/whisper_python_job.py MODEL_DIR AUDIO.wav OUT.png THREADS

MODEL_DIR is a transformers Whisper folder with its processor (tests/reference/
ct2_to_transformers.py writes tiny.en's); AUDIO a 16 kHz recording of at most 30 seconds (the
one window generate reads without long-form decoding). `cargo bench --bench whisper` times it as
a whole process. Prints the transcript on stderr.
"""
import sys


def main():
    model_dir, audio_path, out, threads = sys.argv[1:5]
    import os

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import soundfile
    import torch
    from transformers import WhisperForConditionalGeneration, WhisperProcessor

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    torch.set_num_threads(int(threads))
    processor = WhisperProcessor.from_pretrained(model_dir)
    model = WhisperForConditionalGeneration.from_pretrained(
        model_dir, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    audio, rate = soundfile.read(audio_path, dtype="float32")
    if audio.ndim > 1:
        audio = audio.mean(axis=1)
    assert rate == 16000, "the job reads 16 kHz recordings"
    inputs = processor(audio, sampling_rate=rate, return_tensors="pt")
    with torch.no_grad():
        result = model.generate(inputs.input_features, output_attentions=True,
                                return_dict_in_generate=True, max_new_tokens=440)
    tokens = result.sequences[0].tolist()
    text = processor.batch_decode(result.sequences, skip_special_tokens=True)[0]
    print(text, file=sys.stderr)
    layers = model.config.decoder_layers
    heads = getattr(model.generation_config, "alignment_heads", None) or [
        [layer, head] for layer in range(layers // 2, layers)
        for head in range(model.config.decoder_attention_heads)]
    # One row per generated token: its last query row of every alignment head, averaged.
    rows = [torch.stack([step[layer][0, head, -1] for layer, head in heads]).mean(0)
            for step in result.cross_attentions]
    matrix = torch.stack(rows).numpy()
    seconds = len(audio) / rate
    frames = int(round(seconds / 0.02))
    labels = [processor.tokenizer.decode([t]) for t in tokens[-len(rows):]]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(14, 3 + 0.18 * len(rows)), sharex=True,
                                      gridspec_kw={"height_ratios": [1, 4]})
    mel = inputs.input_features[0].numpy()[:, :2 * frames]
    top.imshow(mel, aspect="auto", origin="lower", extent=(0, seconds, 0, mel.shape[0]))
    top.set_ylabel("mel bin")
    bottom.imshow(matrix[:, :frames], aspect="auto", cmap="viridis",
                  extent=(0, seconds, len(rows), 0), interpolation="nearest")
    bottom.set_yticks([i + 0.5 for i in range(len(rows))], labels, fontsize=7)
    bottom.set_xlabel("seconds")
    fig.suptitle("cross-attention of the alignment heads, by generated token")
    fig.savefig(out, dpi=100, bbox_inches="tight")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""CTranslate2 itself transcribing a recording, without attention: the speed anchor of
`cargo bench --bench whisper` (issue 44, requirement 7). Not a test dependency:
`pip install ctranslate2 transformers soundfile` into the interpreter the bench is given.

    python3 benches/whisper_ct2_anchor.py CT2_DIR AUDIO.wav THREADS

CT2_DIR is a CTranslate2 Whisper folder (scripts/fetch-whisper-tiny.sh fetches tiny.en's);
AUDIO a 16 kHz recording of at most 30 seconds. The log-mel spectrogram is transformers'
WhisperFeatureExtractor's (the one faster-whisper copies), greedy decoding from the English-only
prompt (start of transcript, no timestamps) as attnviz's default. Prints the transcript on stderr.
"""
import sys


def main():
    ct2_dir, audio_path, threads = sys.argv[1:4]
    import ctranslate2
    import soundfile
    from tokenizers import Tokenizer
    from transformers import WhisperFeatureExtractor

    model = ctranslate2.models.Whisper(ct2_dir, device="cpu", inter_threads=1,
                                       intra_threads=int(threads))
    tokenizer = Tokenizer.from_file(f"{ct2_dir}/tokenizer.json")
    audio, rate = soundfile.read(audio_path, dtype="float32")
    if audio.ndim > 1:
        audio = audio.mean(axis=1)
    assert rate == 16000, "the anchor reads 16 kHz recordings"
    features = WhisperFeatureExtractor(feature_size=model.n_mels)(
        audio, sampling_rate=rate, return_tensors="np").input_features
    prompt = [tokenizer.token_to_id(t) for t in ("<|startoftranscript|>", "<|notimestamps|>")]
    result = model.generate(ctranslate2.StorageView.from_array(features), [prompt],
                            beam_size=1, max_length=448)
    print(tokenizer.decode(result[0].sequences_ids[0]), file=sys.stderr)


if __name__ == "__main__":
    main()

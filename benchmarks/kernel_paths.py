"""Which kernel settings reproduce the recording's kernel results on this CPU.

    .venv/bin/python benchmarks/kernel_paths.py

For each MKL code-path setting (ATen and oneDNN capped at AVX2, as scripts/kernel_env.sh caps
them, except where a row says otherwise), a fresh process prints the fingerprint's kernel hashes
(rt_lib.runtime.fingerprint.kernel_hashes: matmul, softmax, layer norm, one AdamW step), which of them
equal the committed recording's, and how many of 65,536 ``torch.sqrt`` results differ from the
correctly rounded ones (numpy's): ATen computes a float32 square root through MKL's vector math,
so the AdamW step parts with MKL's code path.  Prints; asserts nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from rt_lib.runtime.fingerprint import recorded

#: row name -> the environment it runs under (on top of the caps below)
SETTINGS = {
    "MKL_CBWR=AVX2 (the AMD recording's pin)": {"MKL_CBWR": "AVX2"},
    "MKL_CBWR unset (MKL's own path)": {},
    "MKL_CBWR=AVX512": {"MKL_CBWR": "AVX512"},
    "MKL_CBWR=AVX2,STRICT": {"MKL_CBWR": "AVX2,STRICT"},
    "MKL_CBWR=COMPATIBLE": {"MKL_CBWR": "COMPATIBLE"},
    "ATen default, MKL_CBWR=COMPATIBLE": {"ATEN_CPU_CAPABILITY": "default",
                                          "MKL_CBWR": "COMPATIBLE"},
}
CAPS = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "RT_THREADS": "1"}

PROBE = """
import json, numpy as np, torch
from rt_lib.runtime.fingerprint import kernel_hashes
torch.set_num_threads(1)
x = torch.rand(65536, generator=torch.Generator().manual_seed(0)) * 10
off = int((torch.sqrt(x).numpy() != np.sqrt(x.numpy())).sum())
print(json.dumps({"kernels": kernel_hashes(), "sqrt_off": off}))
"""


def main() -> int:
    recording = next(fp for fp in recorded().values() if fp)
    print(f"recorded on: {recording['cpu'].get('name')} ({recording['cpu'].get('vendor')}), "
          f"{recording['kernel_env']}")
    names = sorted(recording["kernels"])
    print(f"{'setting':<40} " + " ".join(f"{n:>10}" for n in names) + "  sqrt off IEEE")
    base = {k: v for k, v in os.environ.items() if k not in ("MKL_CBWR", *CAPS)}
    for row, env in SETTINGS.items():
        out = subprocess.run([sys.executable, "-c", PROBE], env=base | CAPS | env,
                             capture_output=True, text=True, check=True)
        got = json.loads(out.stdout.strip().splitlines()[-1])
        same = ["same" if got["kernels"][n] == recording["kernels"][n] else "differs"
                for n in names]
        print(f"{row:<40} " + " ".join(f"{s:>10}" for s in same)
              + f"  {got['sqrt_off']:,} of 65,536")
    return 0


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: Apache-2.0
# The Python examples (examples/python) run as a user runs them, each checked on its output:
# the training loop learns (one epoch on Debian's Fashion-MNIST), and an ONNX model's outputs
# equal ONNX Runtime's committed ones on every platform there is. (mnist_softmax.py is run by
# ctest's python_mnist_example against the C++ example.)
import json
import os
import subprocess
import sys

import pytest

import hetgraph as hg

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples", "python")
DATA = "/usr/share/datasets/fashion-mnist"


def run(script, *args):
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, script), *args],
                          capture_output=True, text=True, env=os.environ)


@pytest.mark.skipif(not os.path.isdir(DATA), reason="no Fashion-MNIST (dataset-fashion-mnist)")
def test_training_loop_learns_and_checkpoints(tmp_path):
    ckpt = str(tmp_path / "mlp.ckpt")
    p = run("train_mlp.py", "--epochs", "1", "--hidden", "64", "--checkpoint", ckpt, "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.strip().splitlines()[-1])
    assert r["steps"] == 600 and r["test_accuracy"] > 0.8, r
    assert os.path.getsize(ckpt) > 4 * 784 * 64


@pytest.mark.parametrize("platform", ["cpu", "opencl"])
def test_onnx_model_matches_onnx_runtimes_outputs(platform):
    if platform == "opencl" and not hg.Platform.opencl_available():
        pytest.skip("no OpenCL device")
    p = run("onnx_vs_ort.py", "--platform", platform)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "probs [1, 10]: max |hetgraph - onnxruntime|" in p.stdout

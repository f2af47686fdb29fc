# SPDX-License-Identifier: Apache-2.0
# The hetgraph Python module (python/module.cpp) against NumPy: graphs built with operators,
# run on every platform there is, training, checkpoints, ONNX sessions, and errors as
# exceptions of the C++ names. Run by ctest (python_module) with PYTHONPATH=build/python.
import os

import numpy as np
import pytest

import hetgraph as hg


def platforms():
    out = [hg.Platform.cpu(engine="sequential", threads=1), hg.Platform.cpu()]
    if hg.Platform.opencl_available():
        out.append(hg.Platform.opencl())
    return out


@pytest.mark.parametrize("platform", platforms(), ids=lambda p: p.name())
def test_graph_runs_as_numpy_computes(platform):
    g = hg.Graph()
    x = g.input("x")
    W = g.variable("W", (3, 2), np.array([[1, -1], [0.5, 2], [-2, 0.25]], np.float32))
    b = g.variable("b", (2,), 0.1)
    y = hg.relu(x @ W + b) * 2.0 - 1.0
    p = hg.softmax(y)
    cg = hg.GraphCompiler(platform).compile(g, {"x": (4, 3)}, [y, p])
    xs = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    cg.run({"x": xs})
    want = np.maximum(xs @ np.array([[1, -1], [0.5, 2], [-2, 0.25]], np.float32) + 0.1, 0) * 2 - 1
    got = cg.read(y)
    assert got.shape == (4, 2) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    e = np.exp(want - want.max(axis=1, keepdims=True))
    np.testing.assert_allclose(cg.read(p), e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    assert cg.shape(p) == (4, 2)


def test_float64_and_lists_are_converted_int32_viewed():
    g = hg.Graph()
    x = g.input("x")
    ids = g.input("ids", hg.DType.i32)
    table = g.variable("table", (4, 2), np.arange(8, dtype=np.float32).reshape(4, 2))
    out = hg.embedding(table, ids) + hg.reduce_sum(x)
    cg = hg.GraphCompiler().compile(g, {"x": (3,), "ids": (2,)}, [out])
    cg.run({"x": np.array([1.0, 2.0, 3.0]), "ids": np.array([3, 1], np.int32)})
    np.testing.assert_array_equal(cg.read(out), [[12, 13], [8, 9]])
    cg.run({"x": [0.5, 0.5, 0.0], "ids": np.array([0, 0], np.int32)})
    np.testing.assert_array_equal(cg.read(out), [[1, 2], [1, 2]])


def test_training_minimizes_and_checkpoints_resume_bitwise(tmp_path):
    g = hg.Graph()
    x, t = g.input("x"), g.input("t", hg.DType.i32)
    W = g.variable("W", (8, 3), hg.Initializer.uniform(-0.5, 0.5, 7))
    b = g.variable("b", (3,))
    loss = hg.reduce_mean(hg.cross_entropy(hg.softmax(x @ W + b), t))
    step = hg.minimize(loss, [W, b], hg.Optimizer.adam(0.05))
    shapes = {"x": (30, 8), "t": (30,)}
    cg = hg.GraphCompiler().compile(g, shapes, [loss, step])
    rng = np.random.default_rng(3)
    ts = (np.arange(30) % 3).astype(np.int32)
    xs = (rng.standard_normal((30, 8)) + ts[:, None]).astype(np.float32)
    cg.run({"x": xs, "t": ts})
    first = float(cg.read(loss)[()])
    for _ in range(10):
        cg.run({"x": xs, "t": ts})
    path = str(tmp_path / "w.ckpt")
    cg.save(path)
    resumed = hg.GraphCompiler().compile(g, shapes, [loss, step])
    report = resumed.load(path)
    assert sorted(report["loaded"]) == sorted(["W", "b", "W/exp_avg", "W/exp_avg_sq",
                                                "b/exp_avg", "b/exp_avg_sq", "step"])
    for _ in range(20):
        cg.run({"x": xs, "t": ts})
        resumed.run({"x": xs, "t": ts})
    assert float(cg.read(loss)[()]) < 0.5 * first
    np.testing.assert_array_equal(cg.read("W"), resumed.read("W"))


def test_errors_are_the_cpp_classes():
    g = hg.Graph()
    x = g.input("x")
    y = x @ g.variable("W", (3, 2))
    with pytest.raises(hg.ShapeError, match="inner dimensions differ"):
        hg.GraphCompiler().compile(g, {"x": (2, 4)}, [y])
    cg = hg.GraphCompiler().compile(g, {"x": (2, 3)}, [y])
    with pytest.raises(hg.UsageError):
        cg.read(y)
    with pytest.raises(hg.FeedError, match="needs 6"):
        cg.run({"x": np.zeros(5, np.float32)})
    with pytest.raises(hg.FeedError, match="dtype int64"):
        cg.run({"x": np.zeros(6, np.int64)})
    with pytest.raises(hg.DataError):
        cg.load("/nonexistent/checkpoint")
    assert issubclass(hg.ShapeError, hg.Error) and issubclass(hg.Error, RuntimeError)


def test_onnx_session_runs_an_exported_graph(tmp_path):
    g = hg.Graph()
    x = g.input("x")
    W = g.variable("W", (4, 5), hg.Initializer.uniform(-1, 1, 2))
    probs = hg.softmax(hg.gelu(x @ W)).named("probs")
    path = str(tmp_path / "m.onnx")
    hg.onnx.export(g, [probs], {"x": (2, 4)}, path, output_names=["probs"])
    s = hg.onnx.load(path, {"x": (2, 4)})
    assert s.input_names() == ["x"] and s.output_names() == ["probs"]
    xs = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    (got,) = s.run(None, {"x": xs})
    cg = hg.GraphCompiler().compile(g, {"x": (2, 4)}, [probs])
    cg.run({"x": xs})
    np.testing.assert_array_equal(got, cg.read(probs))
    with pytest.raises(hg.DataError):
        hg.onnx.load(str(tmp_path / "missing.onnx"))


def test_mapped_input_is_the_graphs_buffer():
    g = hg.Graph()
    x = g.input("x")
    y = hg.reduce_sum(x * 3.0)
    cg = hg.GraphCompiler().compile(g, {"x": (2, 5)}, [y])
    xb = cg.mapped_input("x")
    assert xb.shape == (2, 5) and xb.dtype == np.float32 and xb.flags.writeable
    xb[:] = np.arange(10, dtype=np.float32).reshape(2, 5)
    cg.run({"x": xb})
    assert float(cg.read(y)) == 135.0
    xb[0, 0] = 100.0  # the same memory: the next run reads it
    cg.run({"x": xb})
    assert float(cg.read(y)) == 435.0
    with pytest.raises(hg.Error):
        cg.mapped_input("nope")

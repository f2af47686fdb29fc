# SPDX-License-Identifier: Apache-2.0
# The Python module's runtime (python/runtime.cpp, io.cpp): asynchronous runs and the GIL,
# platform and compile options, heterogeneous placement, variable stores, schedules, batch
# orders, profiles and traces, dynamic shapes, and reports as dicts. Each against NumPy or the
# C++ behaviour it wraps, on every platform there is where the platform matters.
import json
import os
import threading
import time

import numpy as np
import pytest

import hetgraph as hg


FASHION = "/usr/share/datasets/fashion-mnist"


def platforms():
    out = [hg.Platform.cpu(engine="sequential", threads=1), hg.Platform.cpu()]
    if hg.Platform.opencl_available():
        out.append(hg.Platform.opencl())
    return out


def classifier(rows=2, classes=3):
    g = hg.Graph()
    x, ids = g.input("x"), g.input("ids", hg.DType.i32)
    loss = hg.reduce_mean(hg.cross_entropy(hg.softmax(x), ids)).named("loss")
    return g, loss, {"x": (rows, classes), "ids": (rows,)}


@pytest.mark.parametrize("platform", platforms(), ids=lambda p: p.name())
def test_run_async_returns_a_handle_whose_wait_raises_the_runs_error(platform):
    g, loss, shapes = classifier()
    cg = hg.GraphCompiler(platform).compile(g, shapes, [loss])
    x = np.zeros((2, 3), np.float32)
    h = cg.run_async({"x": x, "ids": np.array([0, 2], np.int32)})
    h.wait()
    assert h.done()
    np.testing.assert_allclose(cg.read(loss), np.log(3.0), rtol=1e-6)
    # The kernel's error: from run_async where the engine ran it at once (sequential), else
    # from wait(), as in C++.
    with pytest.raises(hg.FeedError, match="class id -1"):
        bad = cg.run_async({"x": x, "ids": np.array([-1, 0], np.int32)})
        bad.wait()
    cg.run({"x": x + 1, "ids": np.array([1, 1], np.int32)})  # still usable
    np.testing.assert_allclose(cg.read(loss), np.log(3.0), rtol=1e-6)


def test_the_gil_is_released_while_a_graph_runs_and_while_wait_waits():
    # A Python thread records the time of each of its steps; while the main thread is inside
    # run() or wait() (holding the GIL would stop that thread), some of its steps must fall.
    g = hg.Graph()
    x = g.input("x")
    y = x
    for i in range(12):
        y = hg.tanh(y @ g.variable(f"W{i}", (384, 384), hg.Initializer.uniform(-0.05, 0.05, i)))
    cg = hg.GraphCompiler(hg.Platform.cpu(engine="sequential", threads=1)).compile(
        g, {"x": (384, 384)}, [y])
    xs = np.ones((384, 384), np.float32)
    cg.run({"x": xs})
    stamps, stop = [], threading.Event()

    def tick():
        while not stop.is_set():
            stamps.append(time.perf_counter())
            time.sleep(0.0005)

    t = threading.Thread(target=tick)
    t.start()
    try:
        time.sleep(0.01)
        t0 = time.perf_counter()
        cg.run({"x": xs})
        t1 = time.perf_counter()
        h = cg.run_async({"x": xs})
        t2 = time.perf_counter()
        h.wait()
        t3 = time.perf_counter()
    finally:
        stop.set()
        t.join()
    assert any(t0 < s < t1 for s in stamps), f"no step in run() of {1e3 * (t1 - t0):.1f} ms"
    assert any(t2 < s < t3 for s in stamps), f"no step in wait() of {1e3 * (t3 - t2):.1f} ms"


def test_cpu_options_reach_the_engine_and_bad_names_are_errors():
    g, loss, shapes = classifier()
    cpu = hg.Platform.cpu(engine="critical-path", executors=2, threads_per_executor=1,
                          pin_threads=False, adapt_to_load=False)
    cg = hg.GraphCompiler(cpu).compile(g, shapes, [loss])
    cg.run({"x": np.zeros((2, 3), np.float32), "ids": np.array([0, 1], np.int32)})
    r = cg.engine_report()
    assert r["engine"] == "critical-path" and r["runs"] == 1
    assert r["cpu"]["executors"] == 2 and r["cpu"]["threads_per_executor"] == 1
    assert [lane["threads"] for lane in r["lanes"]] == [1, 1]
    assert r["opencl"] is None and r["hetero"] is None
    assert r["cpu"]["code_path"].startswith("x86-64")
    with pytest.raises(hg.PlatformError, match="fastest"):
        hg.Platform.cpu(engine="fastest")


@pytest.mark.skipif(not hg.Platform.opencl_available(), reason="no OpenCL device")
def test_opencl_options_and_devices():
    devices = hg.Platform.opencl_devices()
    assert devices and {"platform_index", "device_index", "name", "type"} <= devices[0].keys()
    d = devices[0]
    g, loss, shapes = classifier()
    p = hg.Platform.opencl(platform_index=d["platform_index"], device_index=d["device_index"],
                           in_order=True)
    cg = hg.GraphCompiler(p).compile(g, shapes, [loss])
    cg.run({"x": np.zeros((2, 3), np.float32), "ids": np.array([0, 1], np.int32)})
    r = cg.engine_report()
    assert r["opencl"]["out_of_order"] is False and r["cpu"] is None
    assert d["name"] in r["opencl"]["device"]
    assert not hg.Platform.opencl_available(platform_index=99)
    with pytest.raises(hg.PlatformError):
        hg.Platform.opencl(platform_index=99)


@pytest.mark.skipif(not hg.Platform.opencl_available(), reason="no OpenCL device")
def test_heterogeneous_places_pinned_nodes_and_computes_as_numpy():
    cpu, gpu = hg.Platform.cpu(), hg.Platform.opencl()
    both = hg.Platform.heterogeneous([cpu, gpu], placement="first")
    assert both.name() == "heterogeneous" and len(both.devices()) == 2
    g = hg.Graph()
    x = g.input("x")
    W = g.variable("W", (3, 4), np.arange(12, dtype=np.float32).reshape(3, 4) / 10)
    h = (x @ W).named("product").on(both.devices()[1])
    y = hg.relu(h - 1.0).named("y")
    cg = hg.GraphCompiler(both).compile(g, {"x": (2, 3)}, [y])
    xs = np.array([[1, 2, 3], [-1, 0, 1]], np.float32)
    cg.run({"x": xs})
    np.testing.assert_allclose(cg.read(y), np.maximum(xs @ (np.arange(12).reshape(3, 4) / 10) - 1, 0),
                               rtol=1e-5, atol=1e-6)
    where = {p["node"]: p for p in cg.placement()}
    product = next(p for name, p in where.items() if "product" in name)
    assert product["device"] == str(both.devices()[1]) and product["reason"] == "pinned"
    relu = next(p for name, p in where.items() if "'y'" in name)
    assert relu["device"] == "cpu"  # "first": every unpinned node on the first member
    report = cg.engine_report()["hetero"]
    assert report["transfers"] >= 1 and report["devices"][0] == "cpu"
    with pytest.raises(hg.UsageError, match="placement"):
        hg.Platform.heterogeneous([cpu, gpu], placement="random")
    with pytest.raises(hg.PlatformError):
        hg.Platform.heterogeneous([])


def test_compile_options_and_a_shared_variable_store():
    g = hg.Graph()
    x, t = g.input("x"), g.input("t")
    W = g.variable("W", (4, 1), 0.0)
    y = (x @ W).named("y")
    loss = hg.reduce_mean((y - t) * (y - t))
    step = hg.minimize(loss, [W], hg.Optimizer.sgd(0.1))
    naive = hg.GraphCompiler(plan_memory=False).compile(g, {"x": (8, 4), "t": (8, 1)}, [loss, step])
    assert naive.planned_bytes() == naive.naive_bytes()
    store = hg.VariableStore()
    compiler = hg.GraphCompiler(hg.Platform.cpu(), variables=store)
    train = compiler.compile(g, {"x": (8, 4), "t": (8, 1)}, [loss, step])
    infer = compiler.compile(g, {"x": (1, 4)}, [y])
    assert store.size() >= 1 and store.bytes() >= 16
    xs = np.eye(8, 4, dtype=np.float32)
    train.run({"x": xs, "t": np.ones((8, 1), np.float32)})
    infer.run({"x": np.ones((1, 4), np.float32)})  # reads the stepped W, nothing copied
    np.testing.assert_array_equal(infer.read("W"), train.read("W"))
    assert float(infer.read(y)) == pytest.approx(float(train.read("W").sum()), rel=1e-6)
    assert float(infer.read(y)) != 0.0


def test_schedules_and_optimizer_fields():
    g = hg.Graph()
    x = g.input("x")
    W = g.variable("W", (2,), 1.0)
    loss = hg.reduce_sum(W * x)
    step = hg.step_counter(g)
    lr = hg.cosine_decay(step, 0.5, total_steps=4, min_lr=0.1)
    opt = hg.Optimizer.named("momentum", 0.5)
    opt.momentum = 0.5
    assert opt.name == "momentum" and opt.learning_rate == 0.5 and opt.momentum == 0.5
    opt = hg.Optimizer.named("sgd", 0.5)
    update = hg.minimize(loss, [W], opt, learning_rate=lr, step=step)
    cg = hg.GraphCompiler().compile(g, {"x": (2,)}, [lr, update])
    w, rates = np.ones(2, np.float32), []
    for k in range(6):
        cg.run({"x": np.ones(2, np.float32)})
        rate = float(cg.read(lr))
        rates.append(rate)
        w = w - np.float32(rate)  # the gradient of sum(W * x) is x = 1
        np.testing.assert_allclose(cg.read("W"), w, rtol=1e-6)
    want = [0.1 + 0.4 * (1 + np.cos(np.pi * min(k, 4) / 4)) / 2 for k in range(6)]
    np.testing.assert_allclose(rates, want, rtol=1e-6)
    assert float(cg.read("step")) == 6.0
    with pytest.raises(hg.UsageError, match="adam"):
        hg.Optimizer.named("adamx", 0.1)


def test_batch_orders_are_seeded_permutations():
    plain = hg.data.BatchOrder(10, 3)
    assert plain.batches() == 3 and not plain.shuffled and plain.batch_size == 3
    plain.start_epoch(0)
    np.testing.assert_array_equal(np.concatenate([plain.batch(k) for k in range(3)]), range(9))
    a, b = hg.data.BatchOrder(10, 3, seed=5), hg.data.BatchOrder(10, 3, seed=5)
    a.start_epoch(1)
    b.start_epoch(1)
    ids = np.concatenate([a.batch(k) for k in range(3)])
    np.testing.assert_array_equal(ids, np.concatenate([b.batch(k) for k in range(3)]))
    assert len(set(ids.tolist())) == 9 and ids.dtype == np.int64
    a.start_epoch(2)
    assert not np.array_equal(ids, np.concatenate([a.batch(k) for k in range(3)]))
    with pytest.raises(hg.DataError):
        a.batch(3)
    with pytest.raises(hg.DataError):
        hg.data.BatchOrder(2, 3)


@pytest.mark.skipif(not os.path.isdir(FASHION), reason="no Fashion-MNIST (dataset-fashion-mnist)")
def test_split_gather_writes_the_records_asked_for():
    train = hg.data.load_mnist(FASHION).train
    pixels = train.rows * train.cols
    images, labels = np.zeros((3, pixels), np.float32), np.zeros(3, np.int32)
    train.gather(np.array([7, 0, 7]), images, labels)
    one = np.zeros((1, pixels), np.float32)
    train.images(7, 1, one)
    np.testing.assert_array_equal(images[0], one[0])
    np.testing.assert_array_equal(images[2], one[0])
    np.testing.assert_array_equal(labels, train.labels[[7, 0, 7]])
    assert 0.0 <= images.min() and images.max() <= 1.0 and images[1].max() > 0
    with pytest.raises(hg.DataError):
        train.gather(np.array([train.count]), images[:1], labels[:1])
    with pytest.raises(hg.UsageError, match="float32"):
        train.gather(np.array([0]), np.zeros((1, pixels)), labels[:1])


def test_profiles_and_traces(tmp_path):
    g = hg.Graph()
    x = g.input("x")
    y = hg.relu(x @ g.variable("W", (16, 8), 0.5)).named("y")
    cg = hg.GraphCompiler(hg.Platform.cpu(engine="sequential")).compile(g, {"x": (4, 16)}, [y])
    cg.start_profile()
    path = str(tmp_path / "trace.json")
    cg.start_trace(path)
    for _ in range(3):
        cg.run({"x": np.ones((4, 16), np.float32)})
    cg.trace_event("input pipeline", "fill", time.monotonic_ns(), time.monotonic_ns() + 1000)
    cg.stop_trace()
    p = cg.stop_profile()
    assert p.runs == 3 and p.node_s > 0
    assert any("matmul" in o["op"] for o in p.ops)
    assert any(n["shape"] == [4, 8] for n in p.nodes)
    assert "matmul" in p.table(5) and json.loads(p.json())["runs"] == 3
    with pytest.raises(hg.UsageError):
        cg.stop_profile()
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    assert any(e.get("name") == "fill" for e in events)
    assert sum(1 for e in events if e.get("ph") == "X") >= 3
    assert cg.kernel_name(y) and "digraph" in cg.to_dot()


@pytest.mark.parametrize("platform", platforms(), ids=lambda p: p.name())
def test_dynamic_graph_runs_any_batch_from_one_object(platform):
    g = hg.Graph()
    x, b = g.input("x"), g.input("b")
    W = g.variable("W", (3, 2), np.array([[1, 2], [3, 4], [5, 6]], np.float32))
    y = (x @ W + hg.reduce_sum(b)).named("y")
    dg = hg.DynamicGraph(g, {"x": ["N", 3], "b": ["N"]}, [y],
                         compiler=hg.GraphCompiler(platform), max_plans=2)
    rng = np.random.default_rng(1)
    for n in [2, 5, 2, 7]:
        xs = rng.standard_normal((n, 3)).astype(np.float32)
        bs = np.ones(n, np.float32)
        dg.run({"x": xs, "b": bs})
        assert dg.dims() == {"N": n} and dg.shape(y) == (n, 2)
        np.testing.assert_allclose(dg.read(y), xs @ W_value() + n, rtol=1e-5, atol=1e-5)
    assert dg.compiles() == 3 and dg.plans() == 2
    assert dg.current().engine_report()["runs"] >= 1
    with pytest.raises(hg.FeedError, match="N"):
        dg.run({"x": np.zeros((4, 3), np.float32), "b": np.zeros(3, np.float32)})
    with pytest.raises(hg.ShapeError):
        hg.DynamicGraph(g, {"x": ["N", 3.5]}, [y])


def W_value():
    return np.array([[1, 2], [3, 4], [5, 6]], np.float32)


def test_onnx_dynamic_models_take_any_batch(tmp_path):
    g = hg.Graph()
    x = g.input("x")
    y = hg.softmax(x @ g.variable("W", (4, 3), hg.Initializer.uniform(-1, 1, 4))).named("y")
    path = str(tmp_path / "m.onnx")
    hg.onnx.export(g, [y], {"x": (1, 4)}, path, output_names=["y"], dynamic_batch=True)
    dg = hg.onnx.dynamic(path)
    fixed = hg.onnx.load(path, {"x": (5, 4)})
    for n in [1, 5, 3]:
        xs = np.linspace(-1, 1, 4 * n, dtype=np.float32).reshape(n, 4)
        dg.run({"x": xs})
        assert dg.shape("y") == (n, 3)
        if n == 5:
            np.testing.assert_array_equal(dg.read("y"), fixed.run(["y"], {"x": xs})[0])
    assert dg.compiles() == 3
    assert fixed.compiled().engine_report()["runs"] == 1


def test_nodes_devices_and_every_error_class():
    g = hg.Graph()
    x = g.input("x").named("pixels")
    assert x.name == "pixels" and x.op == "input" and x.dtype == hg.DType.f32
    assert "pixels" in repr(x)
    assert str(hg.Device.opencl(0, 1)) == "opencl:0:1" and hg.Device.cpu().kind == "cpu"
    assert hg.Device.cpu() == hg.Device.cpu()
    for name in ["GraphError", "ShapeError", "FeedError", "PlatformError", "DataError",
                 "CommunicationError", "UsageError", "InternalError", "UnsupportedError"]:
        assert issubclass(getattr(hg, name), hg.Error), name
    with pytest.raises(hg.GraphError):
        hg.minimize(hg.reduce_sum(x), [x], hg.Optimizer.sgd(0.1))


def test_read_into_an_array_of_the_callers():
    g = hg.Graph()
    x = g.input("x")
    y = (x * 2.0).named("y")
    cg = hg.GraphCompiler().compile(g, {"x": (2, 3)}, [y])
    cg.run({"x": np.arange(6, dtype=np.float32).reshape(2, 3)})
    out = np.empty((2, 3), np.float32)
    assert cg.read(y, out=out) is out
    np.testing.assert_array_equal(out, np.arange(6).reshape(2, 3) * 2)
    with pytest.raises(hg.UsageError, match="float32"):
        cg.read(y, out=np.empty((2, 3)))
    with pytest.raises(hg.Error):
        cg.read(y, out=np.empty(5, np.float32))


@pytest.mark.parametrize("platform", platforms(), ids=lambda p: p.name())
def test_convolutions_and_pooling_take_their_options_as_keywords(platform):
    g = hg.Graph()
    x = g.input("x")
    w = g.variable("w", (2, 1, 3, 3), np.arange(18, dtype=np.float32).reshape(2, 1, 3, 3) / 10)
    b = g.variable("b", (2,), np.array([0.5, -0.5], np.float32))
    c = hg.conv2d(x, w, b, padding=(1, 1), stride=(2, 2)).named("c")
    m = hg.max_pool2d(x, kernel=(2, 2)).named("m")
    a = hg.avg_pool2d(x, kernel=(3, 3), stride=(1, 1), padding=(1, 1),
                      count_include_pad=True).named("a")
    cg = hg.GraphCompiler(platform).compile(g, {"x": (1, 1, 4, 4)}, [c, m, a])
    xs = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    cg.run({"x": xs})
    padded = np.pad(xs[0, 0], 1)
    wv = np.arange(18, dtype=np.float32).reshape(2, 3, 3) / 10
    want = np.array([[[(padded[i:i + 3, j:j + 3] * wv[o]).sum() + [0.5, -0.5][o]
                       for j in range(0, 4, 2)] for i in range(0, 4, 2)] for o in range(2)])
    np.testing.assert_allclose(cg.read(c)[0], want, rtol=1e-5)
    np.testing.assert_array_equal(cg.read(m)[0, 0], [[5, 7], [13, 15]])
    avg = np.array([[padded[i:i + 3, j:j + 3].sum() / 9 for j in range(4)] for i in range(4)])
    np.testing.assert_allclose(cg.read(a)[0, 0], avg, rtol=1e-6)
    with pytest.raises(hg.ShapeError):
        hg.GraphCompiler(platform).compile(g, {"x": (1, 2, 4, 4)}, [c])


@pytest.mark.parametrize("platform", platforms(), ids=lambda p: p.name())
def test_onnx_state_inputs_are_fed_back_from_their_outputs(platform, tmp_path):
    g = hg.Graph()
    past, x = g.input("past"), g.input("x")
    present = (past * 0.5 + x).named("present")
    total = hg.reduce_sum(present).named("total")
    path = str(tmp_path / "state.onnx")
    hg.onnx.export(g, [present, total], {"past": (2, 2), "x": (2, 2)}, path,
                   output_names=["present", "total"])
    sess = hg.onnx.load(path, platform=platform, state={"past": "present"})
    assert sess.input_names() == ["x"]
    xs = np.array([[1, 2], [3, 4]], np.float32)
    state = np.zeros((2, 2), np.float32)
    for _ in range(3):
        (got,) = sess.run(["total"], {"x": xs})
        state = state * 0.5 + xs
        assert float(got) == pytest.approx(float(state.sum()))
    np.testing.assert_array_equal(sess.compiled().read("past"), state)
    with pytest.raises(hg.ShapeError, match="not an output"):
        hg.onnx.load(path, state={"past": "nope"})


def test_onnx_float64_models_run_as_float32_only_when_asked():
    path = "/usr/share/libonnx-testdata/data/node/test_max_float64/model.onnx"
    if not os.path.exists(path):
        pytest.skip("no ONNX backend test data")
    with pytest.raises(hg.UnsupportedError, match="float64_as_float32"):
        hg.onnx.load(path)
    sess = hg.onnx.load(path, float64_as_float32=True)
    a = np.array([1, 5, 3], np.float32)
    b = np.array([4, 2, 6], np.float32)
    (got,) = sess.run(None, {n: v for n, v in zip(sess.input_names(), (a, b))})
    np.testing.assert_array_equal(got, [4, 5, 6])

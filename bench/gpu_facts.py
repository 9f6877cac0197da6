"""Measure the hardware facts the cluster presets guess, on a real GPU (PyTorch; no placer import).

Run on a machine with one CUDA GPU: ``python -m bench.gpu_facts --out DIR``. Writes ``DIR/gpu_facts.json``
after every section, so an interrupted run keeps what it measured, and prints a short table at the end.

Sections (each timed with CUDA events, warm-up first, median of repeats):
- copies: host<->device bandwidth and latency, pinned and pageable, one stream and two at once;
- launch: the per-op cost of a chain of tiny kernels, dispatched eagerly (host-bound) and replayed
  from a CUDA graph (device-bound), and one launch + synchronize round trip;
- rates: achieved FLOP/s of matrix products and convolutions (fp32, tf32, bf16/fp16) and achieved
  bytes/s of element-wise ops, at the sizes our benchmark graphs have;
- training: whole training steps of ResNet-50, Inception v3, a 4-layer LSTM and a BERT-base-sized
  encoder at published batch sizes: step time and peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

import torch

RESULTS: dict = {}


def save(out: Path) -> None:
    (out / "gpu_facts.json").write_text(json.dumps(RESULTS, indent=1))


def gpu_time(fn, warmup: int = 3, repeat: int = 10, inner: int = 1) -> float:
    """Median seconds of one call of `fn`, timed with CUDA events over `inner` back-to-back calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / inner)
    return statistics.median(times)


def wall_time(fn, warmup: int = 3, repeat: int = 10, inner: int = 1) -> float:
    """Median host seconds of one call of `fn` (synchronized), for what events cannot see."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / inner)
    return statistics.median(times)


def machine() -> None:
    props = torch.cuda.get_device_properties(0)
    RESULTS["machine"] = {
        "gpu": props.name, "multiprocessors": props.multi_processor_count,
        "memory_bytes": props.total_memory, "torch": torch.__version__,
        "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
        "cpu_count": os.cpu_count(),
    }
    try:
        RESULTS["machine"]["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,"
             "clocks.max.sm,clocks.max.mem,power.limit", "--format=csv"],
            capture_output=True, text=True, timeout=30).stdout.strip()
        RESULTS["machine"]["topo"] = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True,
                                                    text=True, timeout=30).stdout.strip()
    except Exception as exc:  # noqa: BLE001 - facts are best effort
        RESULTS["machine"]["nvidia_smi_error"] = repr(exc)


def copies() -> None:
    rows = []
    dev = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    pinned = torch.empty(1 << 30, dtype=torch.uint8).pin_memory()
    pageable = torch.empty(1 << 30, dtype=torch.uint8)
    pageable.fill_(1)
    for size in (4, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30):
        for host_name, host in (("pinned", pinned), ("pageable", pageable)):
            h, d = host[:size], dev[:size]
            repeat = 20 if size <= (16 << 20) else 5
            inner = 20 if size <= (1 << 20) else 1
            h2d = wall_time(lambda: d.copy_(h, non_blocking=True), repeat=repeat, inner=inner)
            d2h = wall_time(lambda: h.copy_(d, non_blocking=True), repeat=repeat, inner=inner)
            rows.append({"bytes": size, "host": host_name, "h2d_s": h2d, "d2h_s": d2h,
                         "h2d_GBps": size / h2d / 1e9, "d2h_GBps": size / d2h / 1e9})
    RESULTS["copies"] = rows
    # Two streams at once: both directions (full duplex?) and two host->device copies (shared port?).
    size = 256 << 20
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    dev2 = torch.empty(size, dtype=torch.uint8, device="cuda")
    pinned2 = torch.empty(size, dtype=torch.uint8).pin_memory()

    def both_directions():
        with torch.cuda.stream(s1):
            dev[:size].copy_(pinned[:size], non_blocking=True)
        with torch.cuda.stream(s2):
            pinned2.copy_(dev2, non_blocking=True)
        s1.synchronize()
        s2.synchronize()

    def two_h2d():
        with torch.cuda.stream(s1):
            dev[:size].copy_(pinned[:size], non_blocking=True)
        with torch.cuda.stream(s2):
            dev2.copy_(pinned2, non_blocking=True)
        s1.synchronize()
        s2.synchronize()

    RESULTS["copies_two_streams"] = {
        "bytes_each": size,
        "h2d_and_d2h_s": wall_time(both_directions, repeat=5),
        "two_h2d_s": wall_time(two_h2d, repeat=5),
        "one_h2d_s": wall_time(lambda: dev[:size].copy_(pinned[:size], non_blocking=True), repeat=5),
    }
    RESULTS["d2d_copy"] = {"bytes": size, "s": gpu_time(lambda: dev2.copy_(dev[:size]), repeat=10, inner=4),
                           "note": "256 MiB device-to-device copy; bandwidth counts read + write"}
    RESULTS["d2d_copy"]["GBps_read_plus_write"] = 2 * size / RESULTS["d2d_copy"]["s"] / 1e9
    del dev, pinned, pageable, dev2, pinned2
    torch.cuda.empty_cache()


def launch() -> None:
    x = torch.ones(256, device="cuda")
    n = 2000

    def chain():
        y = x
        for _ in range(n):
            y = y + 1.0
        return y

    eager = wall_time(chain, repeat=5) / n
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        chain()
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        chain()
    replay = gpu_time(graph.replay, repeat=10) / n

    def round_trip():
        x.add_(1.0)
        torch.cuda.synchronize()

    RESULTS["launch"] = {
        "chain_ops": n, "tensor_elements": 256,
        "eager_per_op_s": eager, "cuda_graph_per_op_s": replay,
        "launch_sync_round_trip_s": wall_time(round_trip, repeat=50, inner=10),
        "note": "eager: PyTorch host dispatch + launch per op (one host thread); graph: back-to-back kernels",
    }


def rates() -> None:
    rows = []
    mm_shapes = [(64, 512, 512), (128, 1024, 1024), (128, 4096, 2048), (512, 4096, 4096), (1024, 1024, 1024),
                 (4096, 4096, 4096), (8192, 8192, 8192)]
    for mode in ("fp32", "tf32", "bf16", "fp16"):
        torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mode, torch.float32)
        for m, n, k in mm_shapes:
            if mode == "fp32" and m * n * k > 4096 ** 3:
                continue
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(k, n, device="cuda", dtype=dtype)
            inner = 50 if m * n * k < 1024 ** 3 else 3
            t = gpu_time(lambda: a @ b, inner=inner)
            rows.append({"op": "matmul", "mode": mode, "shape": [m, n, k], "s": t, "TFLOPs": 2 * m * n * k / t / 1e12})
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    # ResNet-50 convolutions (batch, size, in, out, kernel, stride) and Inception-style ones.
    convs = [(128, 224, 3, 64, 7, 2), (128, 56, 64, 64, 3, 1), (128, 56, 64, 256, 1, 1), (128, 28, 128, 128, 3, 1),
             (128, 14, 256, 256, 3, 1), (128, 7, 512, 512, 3, 1), (128, 7, 2048, 512, 1, 1), (32, 56, 64, 64, 3, 1),
             (32, 14, 256, 256, 3, 1), (32, 35, 192, 64, 1, 1)]
    for mode in ("fp32", "tf32", "fp16"):
        torch.backends.cudnn.allow_tf32 = mode == "tf32"
        dtype = torch.float16 if mode == "fp16" else torch.float32
        for batch, size, cin, cout, kernel, stride in convs:
            conv = torch.nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False).cuda().to(dtype)
            x = torch.randn(batch, cin, size, size, device="cuda", dtype=dtype, requires_grad=True)
            if mode == "fp16":
                conv = conv.to(memory_format=torch.channels_last)
                x = x.detach().to(memory_format=torch.channels_last).requires_grad_()
            out_size = (size + 2 * (kernel // 2) - kernel) // stride + 1
            flops = 2 * batch * out_size * out_size * cout * cin * kernel * kernel
            with torch.no_grad():
                fwd = gpu_time(lambda: conv(x), repeat=10, inner=5)
            y = conv(x)
            grad = torch.randn_like(y)
            bwd = gpu_time(lambda: torch.autograd.grad(y, (x, conv.weight), grad, retain_graph=True), repeat=10, inner=3)
            rows.append({"op": "conv2d", "mode": mode, "shape": [batch, size, cin, cout, kernel, stride],
                         "fwd_s": fwd, "bwd_s": bwd, "fwd_TFLOPs": flops / fwd / 1e12,
                         "bwd_TFLOPs": 2 * flops / bwd / 1e12})
    torch.backends.cudnn.allow_tf32 = False
    for elements in (1 << 10, 1 << 14, 1 << 17, 1 << 20, 1 << 23, 1 << 26, 1 << 28):
        a = torch.randn(elements, device="cuda")
        b = torch.randn(elements, device="cuda")
        inner = 100 if elements <= (1 << 20) else 5
        add = gpu_time(lambda: torch.add(a, b), inner=inner)
        relu = gpu_time(lambda: torch.relu(a), inner=inner)
        rows.append({"op": "add", "mode": "fp32", "elements": elements, "s": add, "GBps": 12 * elements / add / 1e9})
        rows.append({"op": "relu", "mode": "fp32", "elements": elements, "s": relu, "GBps": 8 * elements / relu / 1e9})
    bn = torch.nn.BatchNorm2d(256).cuda()
    x = torch.randn(128, 256, 56, 56, device="cuda")
    t = gpu_time(lambda: bn(x), repeat=10, inner=5)
    rows.append({"op": "batchnorm_train_fwd", "mode": "fp32", "shape": [128, 256, 56, 56], "s": t,
                 "GBps": 2 * x.numel() * 4 / t / 1e9})
    RESULTS["rates"] = rows


def train_step_time(model, make_batch, loss_fn, steps: int = 8, amp: torch.dtype | None = None,
                    channels_last: bool = False) -> dict:
    model = model.cuda()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    inputs, target = make_batch()
    if channels_last:
        inputs = inputs.to(memory_format=torch.channels_last)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp or torch.float32, enabled=amp is not None):
            out = model(inputs)
            loss = loss_fn(out, target)
        loss.backward()
        opt.step()

    torch.cuda.reset_peak_memory_stats()
    seconds = wall_time(step, warmup=3, repeat=steps)
    return {"step_s": seconds, "peak_memory_bytes": torch.cuda.max_memory_allocated(),
            "parameters": sum(p.numel() for p in model.parameters())}


def training() -> None:
    import torchvision

    rows = []
    ce = torch.nn.CrossEntropyLoss()

    def images(batch, size, classes=1000):
        return lambda: (torch.randn(batch, 3, size, size, device="cuda"),
                        torch.randint(0, classes, (batch,), device="cuda"))

    def inception_loss(out, target):
        return ce(out.logits if hasattr(out, "logits") else out, target)

    runs = [
        ("resnet50", 128, "fp32", lambda: torchvision.models.resnet50(), images(128, 224), ce, None, False),
        ("resnet50", 128, "tf32", lambda: torchvision.models.resnet50(), images(128, 224), ce, None, False),
        ("resnet50", 256, "amp_fp16", lambda: torchvision.models.resnet50(), images(256, 224), ce,
         torch.float16, True),
        ("inception_v3", 128, "tf32", lambda: torchvision.models.inception_v3(init_weights=False, aux_logits=True),
         images(128, 299), inception_loss, None, False),
        ("vgg16", 64, "tf32", lambda: torchvision.models.vgg16(), images(64, 224), ce, None, False),
    ]
    for name, batch, mode, build, make_batch, loss, amp, cl in runs:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = mode == "tf32"
        torch.backends.cudnn.benchmark = True
        try:
            row = train_step_time(build(), make_batch, loss, amp=amp, channels_last=cl)
        except Exception as exc:  # noqa: BLE001 - keep the other rows
            row = {"error": repr(exc)[:300]}
        row.update(model=name, batch=batch, mode=mode)
        if "step_s" in row:
            row["samples_per_s"] = batch / row["step_s"]
        rows.append(row)
        RESULTS["training"] = rows
        torch.cuda.empty_cache()

    class LSTMModel(torch.nn.Module):
        """GNMT/rnnlm-style: embedding, 4-layer LSTM 1024, softmax over 32k words."""

        def __init__(self, vocab=32000, hidden=1024, layers=4):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, hidden)
            self.lstm = torch.nn.LSTM(hidden, hidden, layers, batch_first=True)
            self.head = torch.nn.Linear(hidden, vocab)

        def forward(self, tokens):
            return self.head(self.lstm(self.embed(tokens))[0])

    class Encoder(torch.nn.Module):
        """BERT-base-sized: 12 layers, 768 wide, 12 heads, 3072 feed-forward, 30522 words."""

        def __init__(self, vocab=30522):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, 768)
            layer = torch.nn.TransformerEncoderLayer(768, 12, 3072, batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)
            self.head = torch.nn.Linear(768, vocab)

        def forward(self, tokens):
            return self.head(self.encoder(self.embed(tokens)))

    def tokens(batch, length, vocab):
        return lambda: (torch.randint(0, vocab, (batch, length), device="cuda"),
                        torch.randint(0, vocab, (batch, length), device="cuda"))

    def seq_loss(out, target):
        return ce(out.reshape(-1, out.shape[-1]), target.reshape(-1))

    for name, batch, mode, build, make_batch, amp in [
        ("lstm4x1024", 128, "tf32", LSTMModel, tokens(128, 40, 32000), None),
        ("bert_base_encoder", 32, "tf32", Encoder, tokens(32, 128, 30522), None),
        ("bert_base_encoder", 32, "amp_fp16", Encoder, tokens(32, 128, 30522), torch.float16),
    ]:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = mode == "tf32"
        try:
            row = train_step_time(build(), make_batch, seq_loss, amp=amp)
        except Exception as exc:  # noqa: BLE001
            row = {"error": repr(exc)[:300]}
        row.update(model=name, batch=batch, mode=mode)
        if "step_s" in row:
            row["samples_per_s"] = batch / row["step_s"]
        rows.append(row)
        RESULTS["training"] = rows
        torch.cuda.empty_cache()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("."))
    parser.add_argument("--sections", default="machine,copies,launch,rates,training")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.sections.split(","):
        t0 = time.perf_counter()
        try:
            globals()[name]()
        except Exception as exc:  # noqa: BLE001 - one broken section must not lose the others
            RESULTS.setdefault("errors", {})[name] = repr(exc)[:500]
        RESULTS.setdefault("section_seconds", {})[name] = round(time.perf_counter() - t0, 1)
        save(args.out)
        print(f"{name}: {RESULTS['section_seconds'][name]} s", flush=True)
    print(json.dumps({k: RESULTS.get(k) for k in ("launch", "copies_two_streams", "d2d_copy")}, indent=1))
    for row in RESULTS.get("copies", []):
        if row["bytes"] in (4, 1 << 20, 1 << 30):
            print(f"copy {row['host']:8s} {row['bytes']:>11d} B  h2d {row['h2d_s'] * 1e6:9.1f} us "
                  f"{row['h2d_GBps']:6.1f} GB/s  d2h {row['d2h_s'] * 1e6:9.1f} us {row['d2h_GBps']:6.1f} GB/s")
    for row in RESULTS.get("training", []):
        print(row)


if __name__ == "__main__":
    main()

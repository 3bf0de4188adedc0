#!/usr/bin/python3
"""onnx_models.py -- writes ONNX files of the zoo's ResNets and GPTs for tests/test_models_onnx.c,
with Debian's python3-onnx (onnx.helper; no PyTorch): the layouts of torchvision's ResNet and
Hugging Face's GPT-2 as their exporters write them (Conv + BatchNormalization, Gemm with
transB; MatMul + Add, LayerNormalization, the tanh GELU spelled out, attention as MatMul,
scale, causal mask and Softmax), initializers named as the zoo names its parameters.

    onnx_models.py OUT_DIR NAME...    NAME: resnet18, resnet-tiny, gpt-tiny, erf

The weights are seeded random values: the test gives both graphs the zoo's values by name.
Exits 77 (a skipped test) when python3-onnx is not installed.
"""
import math
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # the test says why it is skipped
    print(f"onnx_models.py: python3-onnx is not installed ({e})", file=sys.stderr)
    sys.exit(77)

OPSET = 17  # LayerNormalization is in opset 17


class Builder:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0
        self.rng = np.random.default_rng(1)

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def param(self, name, shape):
        self.inits.append(numpy_helper.from_array(
            self.rng.standard_normal(shape).astype(np.float32) * 0.1, name))
        return name

    def const(self, value, dtype=np.float32):
        out = self.name("const")
        t = numpy_helper.from_array(np.array(value, dtype=dtype), out)
        self.nodes.append(helper.make_node("Constant", [], [out], value=t, name=out))
        return out

    def op(self, op, inputs, scope, outputs=1, **attrs):
        outs = [self.name(f"{scope}/{op}") for _ in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=f"{scope}/{op}_{self.n}", **attrs))
        return outs[0] if outputs == 1 else outs

    def model(self, name, inp, out):
        g = helper.make_graph(self.nodes, name, [inp], [out], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="npusim tests/onnx_models.py")
        onnx.checker.check_model(m)
        return m


def resnet(layers, width, classes, image):
    """torchvision's ResNet with basic blocks (ResNet-18: 2 2 2 2, width 64)."""
    b = Builder()

    def conv_bn(x, cin, cout, k, stride, conv, bn, relu):
        w = b.param(f"{conv}.weight", (cout, cin, k, k))
        p = (k - 1) // 2
        y = b.op("Conv", [x, w], conv, kernel_shape=[k, k], strides=[stride] * 2, pads=[p] * 4)
        y = b.op("BatchNormalization", [y, b.param(f"{bn}.weight", (cout,)),
                                        b.param(f"{bn}.bias", (cout,)),
                                        b.param(f"{bn}.running_mean", (cout,)),
                                        b.param(f"{bn}.running_var", (cout,))], bn, epsilon=1e-5)
        return b.op("Relu", [y], bn) if relu else y

    x = conv_bn("input", 3, width, 7, 2, "conv1", "bn1", True)
    x = b.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4)
    cin = width
    for stage, n in enumerate(layers):
        planes = width << stage
        for blk in range(n):
            stride = 2 if stage > 0 and blk == 0 else 1
            pre = f"layer{stage + 1}.{blk}"
            y = conv_bn(x, cin, planes, 3, stride, f"{pre}.conv1", f"{pre}.bn1", True)
            y = conv_bn(y, planes, planes, 3, 1, f"{pre}.conv2", f"{pre}.bn2", False)
            idn = x
            if stride != 1 or cin != planes:
                idn = conv_bn(x, cin, planes, 1, stride, f"{pre}.downsample.0",
                              f"{pre}.downsample.1", False)
            x = b.op("Relu", [b.op("Add", [y, idn], f"{pre}.add")], f"{pre}.add")
            cin = planes
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x], "avgpool")], "avgpool", axis=1)
    x = b.op("Gemm", [x, b.param("fc.weight", (classes, cin)), b.param("fc.bias", (classes,))],
             "fc", transB=1)
    # BN's running variance must be positive
    for t in b.inits:
        if t.name.endswith("running_var"):
            t.CopyFrom(numpy_helper.from_array(np.abs(numpy_helper.to_array(t)) + 1, t.name))
    inp = helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, image, image])
    out = helper.make_tensor_value_info(x, TensorProto.FLOAT, ["N", classes])
    return b.model("resnet", inp, out)


def gpt(layers, d, heads, vocab, ctx):
    """Hugging Face's GPT-2 (tied head): pre-LN blocks, learned positions, tanh GELU."""
    b = Builder()
    dh = d // heads
    wte = b.param("wte.weight", (vocab, d))
    x = b.op("Gather", [wte, "tokens"], "wte")
    pos = b.op("Slice", [b.param("wpe.weight", (ctx, d)), b.const([0], np.int64),
                         b.const([ctx], np.int64), b.const([0], np.int64)], "wpe")
    x = b.op("Add", [x, pos], "wpe")
    mask = np.triu(np.full((ctx, ctx), -1e9, np.float32), 1)
    for l in range(layers):
        pre = f"h.{l}"

        def ln(x, name):
            return b.op("LayerNormalization", [x, b.param(f"{name}.weight", (d,)),
                                               b.param(f"{name}.bias", (d,))], name,
                        axis=-1, epsilon=1e-5)

        def linear(x, name, i, o):
            y = b.op("MatMul", [x, b.param(f"{name}.weight", (i, o))], name)
            return b.op("Add", [y, b.param(f"{name}.bias", (o,))], name)

        h = ln(x, f"{pre}.ln_1")
        qkv = linear(h, f"{pre}.attn.c_attn", d, 3 * d)
        q, k, v = b.op("Split", [qkv, b.const([d, d, d], np.int64)], f"{pre}.attn", outputs=3,
                       axis=2)
        split = b.const([0, 0, heads, dh], np.int64)
        q, k, v = (b.op("Transpose", [b.op("Reshape", [t, split], f"{pre}.attn")],
                        f"{pre}.attn", perm=[0, 2, 1, 3]) for t in (q, k, v))
        s = b.op("MatMul", [q, b.op("Transpose", [k], f"{pre}.attn", perm=[0, 1, 3, 2])],
                 f"{pre}.attn")
        s = b.op("Mul", [s, b.const(1 / math.sqrt(dh))], f"{pre}.attn")
        s = b.op("Add", [s, b.const(mask)], f"{pre}.attn")
        a = b.op("MatMul", [b.op("Softmax", [s], f"{pre}.attn", axis=-1), v], f"{pre}.attn")
        a = b.op("Reshape", [b.op("Transpose", [a], f"{pre}.attn", perm=[0, 2, 1, 3]),
                             b.const([0, 0, d], np.int64)], f"{pre}.attn")
        x = b.op("Add", [x, linear(a, f"{pre}.attn.c_proj", d, d)], f"{pre}.residual1")
        f = linear(ln(x, f"{pre}.ln_2"), f"{pre}.mlp.c_fc", d, 4 * d)
        # GELU, tanh form: 0.5 f (1 + tanh(sqrt(2/pi) (f + 0.044715 f^3)))
        c = b.op("Mul", [b.op("Pow", [f, b.const(3.0)], f"{pre}.mlp.act"), b.const(0.044715)],
                 f"{pre}.mlp.act")
        t = b.op("Tanh", [b.op("Mul", [b.op("Add", [f, c], f"{pre}.mlp.act"),
                                       b.const(math.sqrt(2 / math.pi))], f"{pre}.mlp.act")],
                 f"{pre}.mlp.act")
        f = b.op("Mul", [b.op("Mul", [f, b.op("Add", [t, b.const(1.0)], f"{pre}.mlp.act")],
                              f"{pre}.mlp.act"), b.const(0.5)], f"{pre}.mlp.act")
        x = b.op("Add", [x, linear(f, f"{pre}.mlp.c_proj", 4 * d, d)], f"{pre}.residual2")
    x = b.op("LayerNormalization", [x, b.param("ln_f.weight", (d,)), b.param("ln_f.bias", (d,))],
             "ln_f", axis=-1, epsilon=1e-5)
    x = b.op("MatMul", [x, b.op("Transpose", [wte], "lm_head", perm=[1, 0])], "lm_head")
    inp = helper.make_tensor_value_info("tokens", TensorProto.INT64, ["N", ctx])
    out = helper.make_tensor_value_info(x, TensorProto.FLOAT, ["N", ctx, vocab])
    return b.model("gpt", inp, out)


def erf():
    """A graph with an operator npusim does not import (Erf: GELU's exact form)."""
    b = Builder()
    y = b.op("Erf", ["x"], "gelu")
    inp = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])
    return b.model("erf", inp, helper.make_tensor_value_info(y, TensorProto.FLOAT, ["N", 8]))


MODELS = {
    "erf": erf,
    "resnet18": lambda: resnet([2, 2, 2, 2], 64, 1000, 224),        # models/resnet18.model
    "resnet-tiny": lambda: resnet([1, 1, 1, 1], 4, 10, 16),         # models/resnet-tiny.model
    "gpt-tiny": lambda: gpt(2, 32, 4, 16, 16),                      # models/gpt-tiny.model
}

if __name__ == "__main__":
    if len(sys.argv) < 3 or any(n not in MODELS for n in sys.argv[2:]):
        sys.exit(f"usage: onnx_models.py OUT_DIR {{{','.join(MODELS)}}}...")
    for name in sys.argv[2:]:
        onnx.save(MODELS[name](), f"{sys.argv[1]}/{name}.onnx")

# SPDX-License-Identifier: Apache-2.0
"""The model bench's models (issue 48): torchvision classifiers across families and torch.nn
text, recurrent and audio models, each with random weights from a fixed seed and its inputs.

Imported by export_models.py (which writes the ONNX files, inputs and the exporter's outputs)
and by torch_child.py (which times the same modules with the same weights). Debian's
python3-torch 1.13 and python3-torchvision 0.14.

Each entry of MODELS: name -> Spec(family, build, inputs, serving batch). `inputs(batch, gen)`
returns an ordered dict of input name -> tensor; the module is called with them in order.
"""
import collections
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

Spec = collections.namedtuple("Spec", "family build inputs serving_batch")


def image(batch, gen):
    return {"x": torch.rand(batch, 3, 224, 224, generator=gen) * 2 - 1}


def tokens(length, vocab):
    def make(batch, gen):
        return {"ids": torch.randint(0, vocab, (batch, length), generator=gen)}
    return make


def vision(name, **kw):
    return lambda: getattr(torchvision.models, name)(weights=None, **kw)


# --- text: BERT-style encoder, written out as Hugging Face's BERT is (LayerNorm and erf GELU,
# attention with a scale and an additive mask), so the export carries the patterns users' BERT
# exports carry.


class Attention(nn.Module):
    def __init__(self, d, heads, causal=False):
        super().__init__()
        self.h, self.dk, self.causal = heads, d // heads, causal
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def split(self, x):
        b, t, _ = x.shape
        return x.view(b, t, self.h, self.dk).transpose(1, 2)

    def forward(self, x, past=None):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dk)
        if self.causal and x.shape[1] > 1:
            t = x.shape[1]
            mask = torch.triu(torch.full((t, t), -1e4), diagonal=1)
            s = s + mask
        a = torch.matmul(torch.softmax(s, dim=-1), v)
        b, _, t, _ = a.shape
        y = self.o(a.transpose(1, 2).reshape(b, t, self.h * self.dk))
        return y, (k, v)


class EncoderLayer(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.att = Attention(d, heads)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.f1, self.f2 = nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        x = self.ln1(x + self.att(x)[0])
        return self.ln2(x + self.f2(F.gelu(self.f1(x))))


class BertEncoder(nn.Module):
    def __init__(self, vocab=8000, d=256, heads=4, ff=1024, layers=4, length=128, classes=2):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(length, d)
        self.ln = nn.LayerNorm(d)
        self.layers = nn.ModuleList(EncoderLayer(d, heads, ff) for _ in range(layers))
        self.cls = nn.Linear(d, classes)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.ln(self.tok(ids) + self.pos(pos))
        for layer in self.layers:
            x = layer(x)
        return self.cls(torch.tanh(x[:, 0]))


# --- GPT-2-style decoder: pre-LayerNorm blocks, tanh GELU (GPT-2's "gelu_new"), a causal
# mask, tied output projection. Run for a whole prompt, and for one token with the key/value
# cache of the positions before it as inputs (past_k0, past_v0, ...: [batch, heads, T, d/heads]
# per layer, rank 4: hetgraph's tensors have rank 4 at most until issue 49), the cache with the
# new position as outputs.


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * torch.pow(x, 3))))


class DecoderBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.att = Attention(d, heads, causal=True)
        self.f1, self.f2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x, past=None):
        a, present = self.att(self.ln1(x), past)
        x = x + a
        return x + self.f2(gelu_tanh(self.f1(self.ln2(x)))), present


class Gpt2(nn.Module):
    def __init__(self, vocab=8000, d=256, heads=4, layers=4, max_len=256):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(DecoderBlock(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def run(self, ids, start, past):
        pos = torch.arange(start, start + ids.shape[1]).unsqueeze(0)
        x = self.tok(ids) + self.pos(pos)
        presents = []
        for i, b in enumerate(self.blocks):
            x, p = b(x, None if past is None else past[i])
            presents.append(p)
        return F.linear(self.ln(x), self.tok.weight), presents


class Gpt2Prompt(Gpt2):
    def forward(self, ids):
        return self.run(ids, 0, None)[0]


class Gpt2Step(Gpt2):
    PAST = 63

    def forward(self, ids, *past):
        logits, presents = self.run(ids, self.PAST, list(zip(past[0::2], past[1::2])))
        return (logits, *(t for kv in presents for t in kv))


def gpt2_step_inputs(batch, gen):
    x = {"ids": torch.randint(0, 8000, (batch, 1), generator=gen)}
    for i in range(4):
        for kv in "kv":
            x[f"past_{kv}{i}"] = torch.randn(batch, 4, Gpt2Step.PAST, 64, generator=gen) * 0.5
    return x


# --- recurrent classifiers (torch's fused LSTM/GRU export as ONNX LSTM/GRU nodes)


class RnnClassifier(nn.Module):
    def __init__(self, cell, vocab=8000, emb=128, hidden=256, layers=2, classes=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = cell(emb, hidden, num_layers=layers, batch_first=True)
        self.out = nn.Linear(hidden, classes)

    def forward(self, ids):
        y, _ = self.rnn(self.emb(ids))
        return self.out(y[:, -1])


class Seq2Seq(nn.Module):
    """A GRU encoder-decoder with teacher forcing: source ids -> state -> target ids' logits."""

    def __init__(self, vocab=4000, emb=128, hidden=256):
        super().__init__()
        self.src, self.tgt = nn.Embedding(vocab, emb), nn.Embedding(vocab, emb)
        self.enc = nn.GRU(emb, hidden, batch_first=True)
        self.dec = nn.GRU(emb, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, src, tgt):
        _, h = self.enc(self.src(src))
        y, _ = self.dec(self.tgt(tgt), h)
        return self.out(y)


def seq2seq_inputs(batch, gen):
    return {"src": torch.randint(0, 4000, (batch, 32), generator=gen),
            "tgt": torch.randint(0, 4000, (batch, 16), generator=gen)}


# --- audio: M5 (Dai et al. 2017), a 1-D CNN on the raw waveform (8 kHz, one second)


class M5(nn.Module):
    def __init__(self, classes=35, ch=64):
        super().__init__()
        layers, cin = [], 1
        for i, (cout, k, s) in enumerate([(ch, 80, 4), (ch, 3, 1), (2 * ch, 3, 1), (2 * ch, 3, 1)]):
            layers += [nn.Conv1d(cin, cout, k, stride=s), nn.BatchNorm1d(cout), nn.ReLU(),
                       nn.MaxPool1d(4)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.out = nn.Linear(cin, classes)

    def forward(self, wave):
        return self.out(self.features(wave).mean(dim=-1))


def waveform(batch, gen):
    return {"wave": torch.rand(batch, 1, 8000, generator=gen) * 2 - 1}


MODELS = collections.OrderedDict([
    ("resnet18", Spec("residual", vision("resnet18"), image, 8)),
    ("resnet50", Spec("residual bottleneck", vision("resnet50"), image, 8)),
    ("resnext50", Spec("grouped", vision("resnext50_32x4d"), image, 8)),
    ("googlenet", Spec("inception", vision("googlenet", aux_logits=False, init_weights=True), image, 8)),
    ("mobilenet_v2", Spec("depthwise", vision("mobilenet_v2"), image, 8)),
    ("mobilenet_v3_small", Spec("depthwise, squeeze-excite", vision("mobilenet_v3_small"), image, 8)),
    ("mobilenet_v3_large", Spec("depthwise, squeeze-excite", vision("mobilenet_v3_large"), image, 8)),
    ("efficientnet_b0", Spec("depthwise, squeeze-excite, SiLU", vision("efficientnet_b0"), image, 8)),
    ("regnet_y_400mf", Spec("grouped, squeeze-excite", vision("regnet_y_400mf"), image, 8)),
    ("shufflenet_v2", Spec("channel shuffle", vision("shufflenet_v2_x1_0"), image, 8)),
    ("densenet121", Spec("dense concat", vision("densenet121"), image, 8)),
    ("squeezenet1_1", Spec("fire modules", vision("squeezenet1_1"), image, 8)),
    ("mnasnet0_5", Spec("depthwise (NAS)", vision("mnasnet0_5"), image, 8)),
    ("convnext_tiny", Spec("large kernel, LayerNorm", vision("convnext_tiny"), image, 4)),
    ("vit_b_16", Spec("vision transformer", vision("vit_b_16"), image, 4)),
    ("swin_t", Spec("shifted windows, rank 5 and 6", vision("swin_t"), image, 4)),
    ("bert_encoder", Spec("text encoder", BertEncoder, tokens(128, 8000), 8)),
    ("gpt2_prompt", Spec("decoder, prompt", Gpt2Prompt, tokens(64, 8000), 8)),
    ("gpt2_step", Spec("decoder, one token with cache", Gpt2Step, gpt2_step_inputs, 8)),
    ("lstm_classifier", Spec("recurrent", lambda: RnnClassifier(nn.LSTM), tokens(64, 8000), 16)),
    ("gru_classifier", Spec("recurrent", lambda: RnnClassifier(nn.GRU), tokens(64, 8000), 16)),
    ("seq2seq_gru", Spec("encoder-decoder", Seq2Seq, seq2seq_inputs, 16)),
    ("m5_audio", Spec("1-D audio CNN", M5, waveform, 16)),
])

SEED = 48


def build(name):
    """The module with its random weights: the same on every call (fixed seed), batch norms
    calibrated on random inputs (fresh ones are an identity, and deep nets' activations would
    grow without bound through random layers), in eval mode."""
    spec = MODELS[name]
    torch.manual_seed(SEED)
    m = spec.build()
    for mod in m.modules():
        # torchvision's ViT starts its head at zero (every output 0: nothing to compare), and
        # nn.Embedding at N(0, 1) gives logits in the hundreds through a tied projection:
        # BERT's and GPT-2's own initialisation instead.
        if isinstance(mod, nn.Embedding) or mod is getattr(getattr(m, "heads", None), "head", None):
            nn.init.normal_(mod.weight, std=0.02)
    bns = [x for x in m.modules() if isinstance(x, nn.modules.batchnorm._BatchNorm)]
    if bns:
        gen = torch.Generator().manual_seed(SEED + 1)
        for bn in bns:
            bn.reset_running_stats()
            bn.momentum = None  # a cumulative average over the calibration batches
        m.train()
        with torch.no_grad():
            for _ in range(4):
                m(*spec.inputs(4, gen).values())
    return m.eval()

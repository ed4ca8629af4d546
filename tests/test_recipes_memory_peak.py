"""The memory profile's predicted peak against the CPU allocator's measured peak."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from embstab.recipes import memory_profile
from embstab.recipes.peak import measure_peak


@pytest.fixture(autouse=True)
def _one_thread():
    """Small per-time-step LSTM ops: with two threads on a shared two-core machine each step's
    thread hand-offs cost ~100x the work (1.6 s against 0.01 s per backward measured)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _mlp(width: int) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))


@pytest.mark.parametrize("width,batch", [(256, 128), (512, 512), (128, 2048)])
def test_predicted_peak_within_ten_percent_of_the_measured_allocation(width, batch):
    """Weight-heavy, balanced and activation-heavy MLPs (Adam state present, gradients set to None)."""
    model = _mlp(width)
    x, t = torch.randn(batch, width), torch.randint(0, 10, (batch,))
    opt = torch.optim.Adam(model.parameters())
    nn.functional.cross_entropy(model(x), t).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    prof = memory_profile(model, (x, t), nn.functional.cross_entropy, optimizer=opt)
    measured = measure_peak(model, (x, t), nn.functional.cross_entropy, opt)
    assert measured.events > 10 and measured.step_peak > 0
    assert abs(prof.peak - measured.peak) <= 0.10 * measured.peak, (prof.peak, measured)
    # the four-kind total alone misses backward's in-flight gradients when activations dominate
    assert prof.backward_peak is not None and prof.backward_peak >= prof.activations


def test_measured_peak_sees_a_known_allocation():
    """The allocator's events: a step whose only big temporary is a known size shows it."""
    lin = nn.Linear(1000, 1, bias=False)
    x = torch.randn(2000, 1000)  # saved for the weight gradient; the input's own gradient is not needed
    m = measure_peak(lin, x)
    assert m.baseline == 4 * (1000 + 2000 * 1000)
    # backward allocates the weight gradient (4 kB) and small outputs; nothing near the input's size
    assert 4 * 1000 <= m.step_peak < 4 * 2000 * 1000 // 10


def _sentences(batch: int, length: int, vocab: int, seed: int = 1):
    """Right-padded random sentences, the longest of full length."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, length + 1, (batch,), generator=g)
    lengths[0] = length
    ids = torch.randint(1, vocab, (batch, length), generator=g) * (torch.arange(length)[None] < lengths[:, None])
    return ids, lengths, g


def _profile_and_measure(model, batch, loss_fn):
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad])
    out = model(*batch[:-1]) if loss_fn is not None else model(*batch)
    (loss_fn(out, batch[-1]) if loss_fn is not None else out.float().sum()).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    prof = memory_profile(model, batch, loss_fn, optimizer=opt)
    return prof, measure_peak(model, batch, loss_fn, opt)


@pytest.mark.parametrize("batch,length,hidden", [(32, 30, 64), (16, 40, 64), (48, 12, 32)])
def test_lstm_classifier_peak_within_ten_percent(batch, length, hidden):
    """Frozen synthetic table, packed 2-layer LSTM: its backward sums one full-size gradient of the
    gate projection per time step (each step's slice gradient is a zero-padded full tensor), so a
    gradient arriving at an occupied buffer is momentarily held twice; the replay must count it."""
    from embstab.downstream.models import LSTMClassifier

    torch.manual_seed(0)
    model = LSTMClassifier(torch.randn(200, 16), 3, hidden=hidden)
    ids, lengths, g = _sentences(batch, length, 200)
    prof, measured = _profile_and_measure(model, (ids, lengths, torch.randint(0, 3, (batch,), generator=g)),
                                          nn.functional.cross_entropy)
    assert abs(prof.peak - measured.peak) <= 0.10 * measured.peak, (prof.peak, measured)


class _TaggerLoss(nn.Module):
    def __init__(self, tagger: nn.Module) -> None:
        super().__init__()
        self.tagger = tagger

    def forward(self, ids, lengths, tags):
        return self.tagger.loss(ids, lengths, tags)


@pytest.mark.parametrize("crf", [False, True])
def test_bilstm_tagger_peak_within_ten_percent(crf):
    """The BiLSTM tagger (relearn layer, packed bidirectional LSTM, cross-entropy or CRF loss)."""
    from embstab.downstream.models import BiLSTMTagger

    torch.manual_seed(0)
    tagger = BiLSTMTagger(torch.randn(300, 16), 5, hidden=32, crf=crf)
    ids, lengths, g = _sentences(16, 20, 300)
    prof, measured = _profile_and_measure(_TaggerLoss(tagger),
                                          (ids, lengths, torch.randint(0, 5, (16, 20), generator=g)), None)
    assert abs(prof.peak - measured.peak) <= 0.10 * measured.peak, (prof.peak, measured)
    # every node could be called: a bias's gradient comes back broadcast and is summed down to the
    # bias's shape before the next node sees it
    assert not prof.peak_is_bound, prof.unmeasured


@pytest.mark.parametrize("kw", [{}, {"micro_batch": 8}, {"storage": "bf16"}, {"checkpoint": ("lstm",)},
                                {"checkpoint": ("lstm",), "micro_batch": 8, "storage": "bf16"}],
                         ids=["plain", "micro-batch", "bf16", "checkpoint", "checkpoint+micro-batch+bf16"])
def test_low_memory_lstm_classifier_peak_within_ten_percent(kw):
    """A wrapped model is replayed per micro-batch, its saved tensors read as stored (16-bit when
    packed), beside the gradients the earlier micro-batches left; a checkpointed child's saved
    tensors come back when its backward begins (recomputed), so checkpointing the whole LSTM
    saves no peak memory."""
    from embstab.downstream.models import LSTMClassifier
    from embstab.recipes import low_memory

    torch.manual_seed(0)
    model = low_memory(LSTMClassifier(torch.randn(200, 16), 3, hidden=64), **kw)
    ids, lengths, g = _sentences(32, 30, 200)
    y = torch.randint(0, 3, (32,), generator=g)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad])
    model.backward_step([ids, lengths], y, nn.functional.cross_entropy)
    opt.step()
    opt.zero_grad(set_to_none=True)
    prof = memory_profile(model, (ids, lengths, y), nn.functional.cross_entropy, optimizer=opt)
    assert prof.backward_peak is not None
    opt.zero_grad(set_to_none=True)  # the profile ran the step; measure it from the same state
    measured = measure_peak(model, (ids, lengths, y), nn.functional.cross_entropy, opt)
    assert abs(prof.peak - measured.peak) <= 0.10 * measured.peak, (prof.peak, measured)


def test_gradients_already_held_count_once():
    """A step that sums into existing ``.grad`` tensors: they are held, and the replay frees each
    new leaf gradient once summed in."""
    torch.manual_seed(0)
    model = _mlp(256)
    x, t = torch.randn(512, 256), torch.randint(0, 10, (512,))
    nn.functional.cross_entropy(model(x), t).backward()
    prof = memory_profile(model, (x, t), nn.functional.cross_entropy)
    assert prof.held_gradients == sum(4 * p.numel() for p in model.parameters())
    measured = measure_peak(model, (x, t), nn.functional.cross_entropy)
    assert abs(prof.peak - measured.peak) <= 0.10 * measured.peak, (prof.peak, measured)


def test_checkpointed_blocks_peak_within_ten_percent():
    """Checkpointed MLP blocks: each block's activations are recomputed when backward reaches it."""
    from embstab.recipes import low_memory

    torch.manual_seed(0)
    blocks = nn.Sequential(*[nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU())
                             for _ in range(4)], nn.Linear(256, 10))
    model = low_memory(blocks, checkpoint=("0", "1", "2", "3"))
    x, t = torch.randn(1024, 256), torch.randint(0, 10, (1024,))
    prof = memory_profile(model, (x, t), nn.functional.cross_entropy)
    model.zero_grad(set_to_none=True)
    measured = measure_peak(model, (x, t), nn.functional.cross_entropy)
    assert abs(prof.peak - measured.peak) <= 0.10 * measured.peak, (prof.peak, measured)
    # a recomputed block's inner tensors (three of 1024 x 256 floats) are live beside the stored inputs
    assert prof.backward_peak >= prof.activations + 3 * 1024 * 256 * 4


def test_sparse_weights_peak_counts_the_dense_masked_tensors():
    """Dynamic sparsity: the kinds count CSR / nonzeros, the peak the dense masked tensors held."""
    from embstab.downstream.models import LSTMClassifier
    from embstab.recipes import low_memory

    torch.manual_seed(0)
    model = low_memory(LSTMClassifier(torch.randn(200, 16), 3, hidden=64), sparse=0.9)
    ids, lengths, g = _sentences(32, 30, 200)
    y = torch.randint(0, 3, (32,), generator=g)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad])
    model.backward_step([ids, lengths], y, nn.functional.cross_entropy)
    model.step(opt)
    opt.zero_grad(set_to_none=True)
    prof = memory_profile(model, (ids, lengths, y), nn.functional.cross_entropy, optimizer=opt)
    dense = sum(p.numel() * 4 for p in model.parameters()) + sum(
        v.numel() * v.element_size() for st in opt.state.values() for v in st.values() if isinstance(v, torch.Tensor))
    assert prof.dense_overhead == dense - prof.weights - prof.optimizer_state > 0
    opt.zero_grad(set_to_none=True)
    measured = measure_peak(model, (ids, lengths, y), nn.functional.cross_entropy, opt)
    assert abs(prof.peak - measured.peak) <= 0.10 * measured.peak, (prof.peak, measured)


# --- families no test above uses: each predicted peak within -5 % / +10 % of the measured one ---

def _assert_close(prof, measured):
    """Under-prediction is the unsafe side for planning: at most 5 % under, 10 % over."""
    ratio = prof.peak / measured.peak
    assert 0.95 <= ratio <= 1.10, (ratio, prof, measured)


def _wrapped_profile_and_measure(model, inputs, target):
    """A :func:`low_memory` model: one step for the Adam state, then profile and measure the next."""
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad])
    model.backward_step(inputs, target, nn.functional.cross_entropy)
    opt.step()
    opt.zero_grad(set_to_none=True)
    prof = memory_profile(model, (*inputs, target), nn.functional.cross_entropy, optimizer=opt)
    opt.zero_grad(set_to_none=True)
    return prof, measure_peak(model, (*inputs, target), nn.functional.cross_entropy, opt)


class _ConvText(nn.Module):
    """Two Conv1d layers over trainable word vectors, max over time, linear."""

    def __init__(self, channels, kernels, vocab=400, dim=40):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.c1 = nn.Conv1d(dim, channels[0], kernels[0], padding=kernels[0] // 2)
        self.c2 = nn.Conv1d(channels[0], channels[1], kernels[1])
        self.out = nn.Linear(channels[1], 4)

    def forward(self, ids):
        x = torch.relu(self.c1(self.emb(ids).transpose(1, 2)))
        return self.out(torch.relu(self.c2(x)).max(dim=2).values)


@pytest.mark.parametrize("channels,kernels,batch,length", [((48, 80), (7, 3), 24, 60), ((96, 32), (3, 5), 16, 90)])
def test_conv1d_text_classifier_peak_within_bounds(channels, kernels, batch, length):
    """A CPU convolution unfolds its input (im2col) in forward and again in backward: memory no
    graph shows, measured once per op and shapes (the old profile was 6 and 12 % under here)."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(2)
    batch_ = (torch.randint(0, 400, (batch, length), generator=g), torch.randint(0, 4, (batch,), generator=g))
    prof, measured = _profile_and_measure(_ConvText(channels, kernels), batch_, nn.functional.cross_entropy)
    _assert_close(prof, measured)
    assert not prof.unmeasured and not prof.peak_is_bound


@pytest.mark.parametrize("kw", [{"stride": 2}, {"dilation": 2}], ids=["stride", "dilation"])
def test_conv2d_net_peak_within_bounds(kw):
    """Two unpadded Conv2d layers (the old profile was 13 and 23 % under)."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 24, 3, **kw), nn.ReLU(), nn.Conv2d(24, 24, 3, **kw), nn.ReLU(),
                        nn.AdaptiveMaxPool2d(1), nn.Flatten(), nn.Linear(24, 10))
    g = torch.Generator().manual_seed(3)
    batch = (torch.randn(16, 3, 32, 32, generator=g), torch.randint(0, 10, (16,), generator=g))
    prof, measured = _profile_and_measure(net, batch, nn.functional.cross_entropy)
    _assert_close(prof, measured)


@pytest.mark.parametrize("conv,shape", [(nn.Conv1d(24, 48, 5), (24, 24, 120)), (nn.Conv2d(6, 24, 3), (12, 6, 28, 28))],
                         ids=["conv1d", "conv2d"])
def test_single_convolution_under_a_sum_loss(conv, shape):
    """The sum's backward returns an expanded scalar gradient, which the convolution's backward
    copies to a dense one before unfolding its input: both are counted, and the expanded
    gradient itself as the few bytes it is (the old profile was 2.6 and 2.8x under)."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(4))
    prof = memory_profile(conv, x)
    conv.zero_grad(set_to_none=True)
    _assert_close(prof, measure_peak(conv, x))


class _GRUNet(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.emb = nn.Embedding.from_pretrained(torch.randn(300, 16), freeze=True)
        self.gru = nn.GRU(16, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, 3)

    def forward(self, ids):
        _, h = self.gru(self.emb(ids))
        return self.out(h[-1])


def test_checkpointed_gru_saves_what_the_allocator_sees():
    """Checkpointing a 2-layer GRU keeps only its input, yet the step's peak hardly moves: in the
    backward pass the checkpoint runs the GRU forward again, and that forward stacks each
    layer's per-step outputs into a fresh tensor while they are still held, on top of the
    gradients already in flight. The replay counts the recomputation's own forward peak, so it
    predicts the small saving that is measured (the old profile predicted a 13 % saving and was
    13 % under)."""
    from embstab.recipes import low_memory

    g = torch.Generator().manual_seed(5)
    ids, y = torch.randint(0, 300, (32, 40), generator=g), torch.randint(0, 3, (32,), generator=g)
    runs = {}
    for ck in [(), ("gru",)]:
        torch.manual_seed(0)
        runs[ck] = _wrapped_profile_and_measure(low_memory(_GRUNet(80), checkpoint=ck), [ids], y)
        _assert_close(*runs[ck])
    (plain, plain_m), (ck, ck_m) = runs[()], runs[("gru",)]
    assert ck.activations < 0.5 * plain.activations  # the checkpoint keeps far fewer tensors ...
    assert ck_m.peak > 0.9 * plain_m.peak  # ... but the measured peak barely moves
    assert abs(ck.peak / plain.peak - ck_m.peak / plain_m.peak) < 0.03  # and the prediction says so


class _Bag(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.bag = nn.EmbeddingBag(6000, 48, mode=mode)
        self.out = nn.Sequential(nn.Linear(48, 64), nn.ReLU(), nn.Linear(64, 5))

    def forward(self, ids, offsets):
        return self.out(self.bag(ids, offsets))


@pytest.mark.parametrize("mode", ["mean", "max"])
def test_embedding_bag_model_peak_within_bounds(mode):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(6)
    offsets = torch.sort(torch.randint(0, 3000, (96,), generator=g)).values
    offsets[0] = 0
    batch = (torch.randint(0, 6000, (3000,), generator=g), offsets, torch.randint(0, 5, (96,), generator=g))
    prof, measured = _profile_and_measure(_Bag(mode), batch, nn.functional.cross_entropy)
    _assert_close(prof, measured)


class _Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(800, 48)
        layer = nn.TransformerEncoderLayer(48, 4, 96, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(48, 3)

    def forward(self, ids):
        return self.out(self.enc(self.emb(ids)).mean(dim=1))


@pytest.mark.parametrize("kw", [{}, {"checkpoint": ("enc",)}], ids=["plain", "checkpoint"])
def test_small_transformer_peak_within_bounds(kw):
    from embstab.recipes import low_memory

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(7)
    prof, measured = _wrapped_profile_and_measure(low_memory(_Encoder(), **kw),
                                                  [torch.randint(0, 800, (12, 40), generator=g)],
                                                  torch.randint(0, 3, (12,), generator=g))
    _assert_close(prof, measured)


def test_bf16_storage_of_a_conv_net_frees_each_copy_after_its_last_reader():
    """16-bit storage keeps one converted copy per saved tensor; each is freed once the last node
    that saved it has run. The old code held every copy until the whole graph was freed: the
    bf16 step's measured peak was 12 % above fp32's, and its profile 25 % under."""
    from embstab.recipes import low_memory

    measured = {}
    for storage in ("fp32", "bf16"):
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(8)
        model = low_memory(_ConvText((64, 96), (5, 3)), storage=storage)
        prof, measured[storage] = _wrapped_profile_and_measure(
            model, [torch.randint(0, 400, (32, 60), generator=g)], torch.randint(0, 4, (32,), generator=g))
        _assert_close(prof, measured[storage])
    # the backward pass widens each copy again while a node uses it, so bf16 does not save here,
    # but it must not cost more than that
    assert measured["bf16"].peak < 1.05 * measured["fp32"].peak


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class _WithFunction(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(32, 4)

    def forward(self, x):
        return self.lin(_Scale.apply(x))


def test_ops_it_cannot_measure_are_named_and_the_peak_is_a_bound():
    """A Python autograd.Function's backward is not called (it may have effects), and nothing
    can be measured while another profiler runs: the profile names those ops instead of
    guessing their workspace."""
    from torch.profiler import ProfilerActivity, profile

    from embstab.recipes.workspace import clear_workspace_cache

    x = torch.randn(8, 32, requires_grad=True)
    prof = memory_profile(_WithFunction(), x)
    assert prof.peak_is_bound and "_ScaleBackward" in prof.unmeasured
    torch.manual_seed(0)
    clear_workspace_cache()
    with profile(activities=[ProfilerActivity.CPU]):
        busy = memory_profile(_ConvText((8, 8), (3, 3)), torch.randint(0, 400, (4, 12)))
    assert busy.peak_is_bound
    assert "aten.convolution.default" in busy.unmeasured and "ConvolutionBackward0" in busy.unmeasured
    assert set(busy.unmeasured.values()) == {"another profiler was running"}
    free = memory_profile(_ConvText((8, 8), (3, 3)), torch.randint(0, 400, (4, 12)))
    assert not free.peak_is_bound


def test_workspace_is_measured_once_per_op_and_shapes():
    """A second profile of the same shapes takes every workspace from the cache; a new shape is measured."""
    from embstab.recipes.peak import ForwardPeak, backward_peak
    from embstab.recipes.workspace import KernelMemory

    conv = nn.Conv1d(8, 16, 3)
    counts = []
    for length in (50, 50, 70):
        kernels = KernelMemory()
        with ForwardPeak(kernels):
            loss = conv(torch.randn(4, 8, length)).sum()
        backward_peak(loss.grad_fn, kernels=kernels)
        counts.append(kernels.measured)
    assert counts[0] > 0 and counts[1] == 0 and counts[2] > 0

"""The checks of the battery: which op, on which fixed inputs, returning which tensors to compare.

Each check is registered with ``_check``; planted checks (never in the battery) prove that the
machinery catches nondeterminism and ops that raise.
"""

import os
import time
from typing import Any, Callable, List, Optional, Sequence

from envpin.probe import tfchild
from envpin.probe.selftest.trial import CHECKS as CHECKS  # the package exports the registries from here (filled)
from envpin.probe.selftest.trial import PLANTED as PLANTED
from envpin.probe.selftest.trial import Check, Trial
from envpin.probe.selftest.trial import check as _check
from envpin.probe.selftest.trial import xla_function as _xla

S1 = [1, 1, 1, 1]
S2 = [1, 2, 2, 1]
K3 = [1, 3, 3, 1]


@_check("conv2d-forward", "Conv2D")
def _conv2d_forward(c: Trial) -> Callable[[], List[Any]]:
    # cuDNN chooses (autotunes) a forward algorithm per shape; some split each output's 3*3*16 = 144-term
    # reduction across thread blocks. 8x32x32x16 gives 8192 output pixels: enough blocks to race.
    x, f = c.normal(8, 32, 32, 16), c.normal(3, 3, 16, 16)
    tf = c.tf
    return lambda: [tf.nn.conv2d(c.const(x), c.const(f), S1, "SAME")]


@_check("conv2d-backprop-filter", "Conv2DBackpropFilter")
def _conv2d_filter(c: Trial) -> Callable[[], List[Any]]:
    # NVIDIA/TF's own test shape: each filter-gradient element sums 8*64*64 = 32768 products, which cuDNN's
    # backprop-filter algorithms 0 and 3 accumulate with atomicAdd across blocks.
    x, f = c.normal(8, 64, 64, 8), c.normal(3, 3, 8, 8)
    tf = c.tf
    return lambda: c.grads(lambda ft: tf.nn.conv2d(c.const(x), ft, S1, "SAME"), [c.const(f)])


@_check("conv2d-backprop-input", "Conv2DBackpropInput")
def _conv2d_input(c: Trial) -> Callable[[], List[Any]]:
    # A 7x7 filter makes 49 overlapping windows contribute to every input pixel (x 8 output channels).
    x, f = c.normal(4, 32, 32, 4), c.normal(7, 7, 4, 8)
    tf = c.tf
    return lambda: c.grads(lambda xt: tf.nn.conv2d(xt, c.const(f), S1, "SAME"), [c.const(x)])


@_check("bias-add-backprop", "BiasAddGrad")
def _bias_add(c: Trial) -> Callable[[], List[Any]]:
    # BiasAddGrad sums 16*32*32 = 16384 values per channel; the GPU kernel used atomicAdd for large N*H*W
    # (nondeterministic before TF 2.1 / the fwr13y patch).
    x, b = c.normal(16, 32, 32, 16), c.normal(16)
    tf = c.tf
    return lambda: c.grads(lambda bt: tf.nn.bias_add(c.const(x), bt), [c.const(b)])


@_check("max-pool-backprop", "MaxPoolGrad")
def _max_pool(c: Trial) -> Callable[[], List[Any]]:
    # 3x3 windows at stride 2 overlap: an input position collects gradient from up to 4 windows
    # (a scatter-add on GPU). Normal inputs have no ties, so the argmax itself is unambiguous.
    x = c.normal(8, 64, 64, 8)
    tf = c.tf
    return lambda: c.grads(lambda xt: tf.nn.max_pool(xt, K3, S2, "SAME"), [c.const(x)])


@_check("avg-pool-backprop", "AvgPoolGrad")
def _avg_pool(c: Trial) -> Callable[[], List[Any]]:
    # Same overlapping 3x3/stride-2 windows: every input sums up to 4 window gradients.
    x = c.normal(8, 64, 64, 8)
    tf = c.tf
    return lambda: c.grads(lambda xt: tf.nn.avg_pool(xt, K3, S2, "SAME"), [c.const(x)])


@_check("resize-bilinear-backprop", "ResizeBilinearGrad")
def _resize_bilinear(c: Trial) -> Callable[[], List[Any]]:
    # 32 -> 61 (a non-integer scale, as tf.image.resize uses: half-pixel centers): each input pixel collects
    # weighted gradient from ~4x4 output pixels, accumulated with atomicAdd on GPU before TF 2.4.
    x = c.normal(8, 32, 32, 8)
    v1 = c.tf.compat.v1.image
    return lambda: c.grads(lambda xt: v1.resize_bilinear(xt, [61, 61], half_pixel_centers=True), [c.const(x)])


@_check("resize-nearest-backprop", "ResizeNearestNeighborGrad")
def _resize_nearest(c: Trial) -> Callable[[], List[Any]]:
    # Nearest-neighbour upsampling 32 -> 61: 3-4 output pixels feed each input pixel's gradient (atomicAdd
    # on GPU; TF >= 2.7 raises there under determinism because no deterministic GPU kernel exists).
    x = c.normal(8, 32, 32, 8)
    v1 = c.tf.compat.v1.image
    return lambda: c.grads(lambda xt: v1.resize_nearest_neighbor(xt, [61, 61], half_pixel_centers=True), [c.const(x)])


@_check("matmul", "MatMul")
def _matmul(c: Trial) -> Callable[[], List[Any]]:
    # K = 1024-term dot products: large enough for cuBLAS to consider split-K algorithms; forward and both
    # gradients (each another 256- or 1024-term GEMM).
    a, b = c.normal(256, 1024), c.normal(1024, 256)
    tf = c.tf
    return lambda: c.output_and_grads(tf.matmul, [c.const(a), c.const(b)])


@_check("reduce-sum-large", "Sum")
def _reduce_sum(c: Trial) -> Callable[[], List[Any]]:
    # 4M elements (16 MB): reduced in many blocks / passes on GPU, and split over threads by Eigen on CPU.
    x = c.normal(1024, 4096)
    tf = c.tf

    def run() -> List[Any]:
        t = c.const(x)
        return [tf.reduce_sum(t), tf.reduce_sum(t, axis=0), tf.reduce_sum(t, axis=1)]

    return run


@_check("reduce-mean-large", "Mean", quick=False)
def _reduce_mean(c: Trial) -> Callable[[], List[Any]]:
    # Same 4M-element input as reduce-sum-large.
    x = c.normal(1024, 4096)
    tf = c.tf

    def run() -> List[Any]:
        t = c.const(x)
        return [tf.reduce_mean(t), tf.reduce_mean(t, axis=0), tf.reduce_mean(t, axis=1)]

    return run


@_check("segment-sum", "SegmentSum")
def _segment_sum(c: Trial) -> Callable[[], List[Any]]:
    # 4096 rows into 128 sorted segments (~32 rows each, 64 columns): the GPU kernel added rows with
    # atomicAdd before TF 2.7 (and raised under determinism in 2.5-2.6).
    data = c.normal(4096, 64)
    ids = c.np.sort(c.rs.randint(0, 128, size=4096)).astype(c.np.int32)
    tf = c.tf
    return lambda: [tf.math.segment_sum(c.const(data), c.const(ids))]


@_check("unsorted-segment-sum", "UnsortedSegmentSum")
def _unsorted_segment_sum(c: Trial) -> Callable[[], List[Any]]:
    # The same volume with unsorted ids: the classic atomicAdd scatter.
    data = c.normal(4096, 64)
    ids = c.rs.randint(0, 128, size=4096).astype(c.np.int32)
    tf = c.tf
    return lambda: [tf.math.unsorted_segment_sum(c.const(data), c.const(ids), 128)]


@_check("gather-gradient", "GatherV2 gradient (UnsortedSegmentSum)")
def _gather_grad(c: Trial) -> Callable[[], List[Any]]:
    # An embedding lookup: 16384 indices into 1000 rows (~16 hits per row). Its gradient is IndexedSlices;
    # densifying it (as optimizers and tf.convert_to_tensor do) is an unsorted segment sum.
    params = c.normal(1000, 64)
    idx = c.rs.randint(0, 1000, size=16384).astype(c.np.int32)
    tf = c.tf
    return lambda: c.grads(lambda p: tf.gather(p, c.const(idx)), [c.const(params)])


@_check("softmax-xent", "SoftmaxCrossEntropyWithLogits")
def _softmax_xent(c: Trial) -> Callable[[], List[Any]]:
    # 256 x 1000 logits: the fused GPU kernel reduced each row nondeterministically before TF 2.6. The
    # official docstring's smoke test uses a (1, 10000) tensor; 256 rows give many more blocks.
    logits = c.normal(256, 1000)
    e = c.np.exp(c.normal(256, 1000))
    labels = (e / e.sum(axis=1, keepdims=True)).astype(c.np.float32)
    tf = c.tf
    return lambda: c.output_and_grads(
        lambda lg: tf.nn.softmax_cross_entropy_with_logits(labels=c.const(labels), logits=lg), [c.const(logits)]
    )


@_check("sparse-softmax-xent", "SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_xent(c: Trial) -> Callable[[], List[Any]]:
    # Same shape with integer labels (raised under determinism in TF 2.6, deterministic from 2.7).
    logits = c.normal(256, 1000)
    labels = c.rs.randint(0, 1000, size=256).astype(c.np.int32)
    tf = c.tf
    return lambda: c.output_and_grads(
        lambda lg: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=c.const(labels), logits=lg), [c.const(logits)]
    )


@_check("scatter-nd-add", "TensorScatterAdd")
def _scatter_nd_add(c: Trial) -> Callable[[], List[Any]]:
    # 16384 updates onto 1024 rows (~16 duplicates per row): duplicates accumulate with atomicAdd on GPU
    # (TF 2.7 made it deterministic by running it on the CPU when determinism is on).
    idx = c.rs.randint(0, 1024, size=(16384, 1)).astype(c.np.int32)
    upd = c.normal(16384, 64)
    tf = c.tf
    add = getattr(tf, "tensor_scatter_nd_add", None) or tf.tensor_scatter_add
    return lambda: [add(tf.zeros([1024, 64], tf.float32), c.const(idx), c.const(upd))]


@_check("depthwise-conv2d-backprop", "DepthwiseConv2dNativeBackpropFilter/Input")
def _depthwise(c: Trial) -> Callable[[], List[Any]]:
    # Each depthwise filter tap sums 8*32*32 = 8192 products (backprop-filter: raised under determinism on
    # GPU in TF 2.7-2.9, deterministic with cuDNN from 2.10); backprop-input gathers 9 taps per pixel.
    x, f = c.normal(8, 32, 32, 16), c.normal(3, 3, 16, 1)
    tf = c.tf
    return lambda: c.grads(lambda xt, ft: tf.nn.depthwise_conv2d(xt, ft, S1, "SAME"), [c.const(x), c.const(f)])


def _fused_bn(c: Trial, training: bool) -> Callable[[], List[Any]]:
    x, scale, offset = c.normal(16, 32, 32, 16), c.normal(16), c.normal(16)
    mean, var = c.normal(16), (c.np.abs(c.normal(16)) + 0.5).astype(c.np.float32)
    tf = c.tf
    fbn = tf.compat.v1.nn.fused_batch_norm

    def fn(xt: Any, st: Any, ot: Any) -> Any:
        if training:
            return fbn(xt, st, ot, is_training=True)[0]
        return fbn(xt, st, ot, mean=c.const(mean), variance=c.const(var), is_training=False)[0]

    return lambda: c.grads(fn, [c.const(x), c.const(scale), c.const(offset)])


@_check("fused-batch-norm-backprop", "FusedBatchNormGradV3")
def _fused_bn_training(c: Trial) -> Callable[[], List[Any]]:
    # Scale and offset gradients reduce 16*32*32 = 16384 values per channel.
    return _fused_bn(c, True)


@_check("fused-batch-norm-backprop-inference", "FusedBatchNormGradV3 (is_training=False)")
def _fused_bn_inference(c: Trial) -> Callable[[], List[Any]]:
    # Backprop with training disabled (fine-tuning a frozen BatchNormalization): the GPU path has no
    # deterministic implementation and raises under determinism from TF 2.7.
    return _fused_bn(c, False)


@_check("ctc-loss", "CTCLoss")
def _ctc_loss(c: Trial) -> Callable[[], List[Any]]:
    # 16 sequences x 64 time steps x 32 classes, labels of length 20, given as a SparseTensor so that TF runs
    # the CTCLoss kernel (cuDNN's CTCLossV2 on GPU) rather than the dense-label scan implementation. Each
    # step's logits gradient sums alpha-beta products over all label positions.
    np = c.np
    logits = c.normal(64, 16, 32)
    labels = c.rs.randint(0, 31, size=(16, 20))
    indices = np.array([[b, t] for b in range(16) for t in range(20)], dtype=np.int64)
    values = labels.reshape(-1).astype(np.int32)
    tf = c.tf
    ctc = getattr(tf.compat, "v2", tf).nn.ctc_loss

    def fn(lg: Any) -> Any:
        sparse = tf.SparseTensor(c.const(indices), c.const(values), [16, 20])
        return ctc(
            labels=sparse,
            logits=lg,
            label_length=None,
            logit_length=tf.fill([16], 64),
            logits_time_major=True,
            blank_index=-1,
        )

    return lambda: c.output_and_grads(fn, [c.const(logits)])


@_check("bincount", "Bincount/DenseBincount")
def _bincount(c: Trial) -> Callable[[], List[Any]]:
    # 65536 weighted values into 1024 bins (64 per bin): the GPU kernel adds weights with atomicAdd and
    # raises under determinism from TF 2.7.
    values = c.rs.randint(0, 1024, size=65536).astype(c.np.int32)
    weights = c.normal(65536)
    tf = c.tf
    return lambda: [tf.math.bincount(c.const(values), weights=c.const(weights), minlength=1024)]


@_check("sparse-dense-matmul", "SparseTensorDenseMatMul")
def _sparse_dense_matmul(c: Trial) -> Callable[[], List[Any]]:
    # A 1024x1024 sparse matrix with 32768 non-zeros (~32 per row) times 1024x64: the GPU kernel sums
    # products with atomicAdd (raises under determinism from TF 2.6); gradient to the dense side too.
    np = c.np
    flat = np.sort(c.rs.choice(1024 * 1024, size=32768, replace=False))
    indices = np.stack([flat // 1024, flat % 1024], axis=1).astype(np.int64)
    values, dense = c.normal(32768), c.normal(1024, 64)
    tf = c.tf

    def fn(d: Any) -> Any:
        sp = tf.SparseTensor(c.const(indices), c.const(values), [1024, 1024])
        return tf.sparse.sparse_dense_matmul(sp, d)

    return lambda: c.output_and_grads(fn, [c.const(dense)])


@_check("conv1d-backprop", "Conv1D (Conv2D on a 1-row image) and its gradients", quick=False)
def _conv1d(c: Trial) -> Callable[[], List[Any]]:
    # 16 sequences of 256 steps, 32 -> 32 channels, width 5: each filter gradient sums 16*256 = 4096 products.
    x, f = c.normal(16, 256, 32), c.normal(5, 32, 32)
    tf = c.tf
    return lambda: c.output_and_grads(lambda xt, ft: tf.nn.conv1d(xt, ft, 1, "SAME"), [c.const(x), c.const(f)])


@_check("conv2d-dilated-backprop", "Conv2D with dilation 2 and its gradients", quick=False)
def _conv2d_dilated(c: Trial) -> Callable[[], List[Any]]:
    # Atrous convolution takes other cuDNN algorithms (and, without cuDNN support, space-to-batch) than the
    # dense case: 8x32x32x8 with a 3x3x8x8 filter at rate 2.
    x, f = c.normal(8, 32, 32, 8), c.normal(3, 3, 8, 8)
    tf = c.tf

    def fn(xt: Any, ft: Any) -> Any:
        try:  # tf.nn.convolution picks cuDNN's dilated kernels on GPU and space-to-batch where needed
            return tf.nn.convolution(xt, ft, padding="SAME", dilations=[2, 2])
        except TypeError:  # the TF1 signature
            return tf.nn.convolution(xt, ft, padding="SAME", dilation_rate=[2, 2])

    return lambda: c.output_and_grads(fn, [c.const(x), c.const(f)])


@_check("conv2d-transpose-backprop", "Conv2DTranspose (Conv2DBackpropInput forward) and its gradients", quick=False)
def _conv2d_transpose(c: Trial) -> Callable[[], List[Any]]:
    # The work-around NVIDIA suggests for nearest-neighbour upsampling: stride-2 transposed convolution,
    # 8x16x16x16 -> 8x32x32x8; its filter gradient is a Conv2DBackpropFilter over 8192 output pixels.
    x, f = c.normal(8, 16, 16, 16), c.normal(3, 3, 8, 16)
    tf = c.tf
    return lambda: c.output_and_grads(
        lambda xt, ft: tf.nn.conv2d_transpose(xt, ft, [8, 32, 32, 8], S2, "SAME"), [c.const(x), c.const(f)]
    )


@_check("conv3d-backprop", "Conv3D and its gradients")
def _conv3d(c: Trial) -> Callable[[], List[Any]]:
    # 4x8x16x16x8 volumes with a 3x3x3x8x8 filter: each filter gradient sums 4*8*16*16 = 8192 products
    # (cuDNN's 3D backprop-filter algorithms accumulate across blocks).
    x, f = c.normal(4, 8, 16, 16, 8), c.normal(3, 3, 3, 8, 8)
    tf = c.tf
    s = [1, 1, 1, 1, 1]
    return lambda: c.output_and_grads(lambda xt, ft: tf.nn.conv3d(xt, ft, s, "SAME"), [c.const(x), c.const(f)])


@_check("max-pool-1d-backprop", "MaxPool (1-D) gradient", quick=False)
def _max_pool_1d(c: Trial) -> Callable[[], List[Any]]:
    # Windows of 3 at stride 2 overlap: up to 2 windows scatter into one input step.
    x = c.normal(16, 512, 16)
    tf = c.tf
    return lambda: c.grads(lambda xt: tf.nn.max_pool1d(xt, 3, 2, "SAME"), [c.const(x)])


@_check("max-pool-3d-backprop", "MaxPool3DGrad", quick=False)
def _max_pool_3d(c: Trial) -> Callable[[], List[Any]]:
    # 3x3x3 windows at stride 2 overlap in three dimensions: up to 8 windows per input voxel.
    x = c.normal(4, 16, 16, 16, 8)
    tf = c.tf
    return lambda: c.grads(lambda xt: tf.nn.max_pool3d(xt, [1, 3, 3, 3, 1], [1, 2, 2, 2, 1], "SAME"), [c.const(x)])


@_check("avg-pool-3d-backprop", "AvgPool3DGrad", quick=False)
def _avg_pool_3d(c: Trial) -> Callable[[], List[Any]]:
    x = c.normal(4, 16, 16, 16, 8)
    tf = c.tf
    return lambda: c.grads(lambda xt: tf.nn.avg_pool3d(xt, [1, 3, 3, 3, 1], [1, 2, 2, 2, 1], "SAME"), [c.const(x)])


def _crop_and_resize(c: Trial, to_boxes: bool) -> Callable[[], List[Any]]:
    # 256 boxes cropped from 4 images of 64x64x8 and resized to 16x16: overlapping boxes scatter their
    # gradients into the same image pixels (CropAndResizeGradImage) and every box coordinate gradient sums
    # 16*16*8 terms (CropAndResizeGradBoxes).
    np = c.np
    image = c.normal(4, 64, 64, 8)
    lo = c.rs.uniform(0.0, 0.5, size=(256, 2))
    boxes = np.concatenate([lo, lo + c.rs.uniform(0.2, 0.5, size=(256, 2))], axis=1).astype(np.float32)
    ind = c.rs.randint(0, 4, size=256).astype(np.int32)
    tf = c.tf

    def fn(img: Any, bx: Any) -> Any:
        return tf.image.crop_and_resize(img, bx, c.const(ind), [16, 16])

    if to_boxes:
        return lambda: c.grads(lambda bx: fn(c.const(image), bx), [c.const(boxes)])
    return lambda: c.grads(lambda img: fn(img, c.const(boxes)), [c.const(image)])


@_check("crop-and-resize-backprop-image", "CropAndResizeGradImage")
def _crop_image(c: Trial) -> Callable[[], List[Any]]:
    return _crop_and_resize(c, False)


@_check("crop-and-resize-backprop-boxes", "CropAndResizeGradBoxes", quick=False)
def _crop_boxes(c: Trial) -> Callable[[], List[Any]]:
    return _crop_and_resize(c, True)


@_check("adjust-contrast", "AdjustContrastv2")
def _adjust_contrast(c: Trial) -> Callable[[], List[Any]]:
    # The per-channel mean over 256x256 pixels is a reduction (atomicAdd on GPU; raises there from TF 2.7).
    x = c.normal(8, 256, 256, 3)
    tf = c.tf
    return lambda: [tf.image.adjust_contrast(c.const(x), 1.7)]


def _segment(c: Trial, op: str, sorted_ids: bool) -> Callable[[], List[Any]]:
    # 4096x64 rows into 128 segments, forward and gradient; prod stays finite on inputs near 1.
    np = c.np
    data = c.normal(4096, 64)
    if op == "prod":
        data = (1.0 + 0.01 * data).astype(np.float32)
    ids = c.rs.randint(0, 128, size=4096)
    ids = (np.sort(ids) if sorted_ids else ids).astype(np.int32)
    tf = c.tf
    if sorted_ids:
        fn = getattr(tf.math, "segment_" + op)
        return lambda: c.output_and_grads(lambda d: fn(d, c.const(ids)), [c.const(data)])
    fn = getattr(tf.math, "unsorted_segment_" + op)
    return lambda: c.output_and_grads(lambda d: fn(d, c.const(ids), 128), [c.const(data)])


@_check("segment-prod", "SegmentProd", quick=False)
def _segment_prod(c: Trial) -> Callable[[], List[Any]]:
    return _segment(c, "prod", True)


@_check("segment-mean", "SegmentMean", quick=False)
def _segment_mean(c: Trial) -> Callable[[], List[Any]]:
    return _segment(c, "mean", True)


@_check("unsorted-segment-prod", "UnsortedSegmentProd", quick=False)
def _unsorted_segment_prod(c: Trial) -> Callable[[], List[Any]]:
    return _segment(c, "prod", False)


@_check("unsorted-segment-mean", "UnsortedSegmentSum (unsorted_segment_mean)", quick=False)
def _unsorted_segment_mean(c: Trial) -> Callable[[], List[Any]]:
    return _segment(c, "mean", False)


@_check("unsorted-segment-sqrt-n", "UnsortedSegmentSum (unsorted_segment_sqrt_n)", quick=False)
def _unsorted_segment_sqrt_n(c: Trial) -> Callable[[], List[Any]]:
    return _segment(c, "sqrt_n", False)


def _scatter(c: Trial, kind: str) -> Callable[[], List[Any]]:
    # 16384 float updates onto 1024 rows (~16 duplicates per row): duplicates accumulate with atomics on GPU.
    idx = c.rs.randint(0, 1024, size=(16384, 1)).astype(c.np.int32)
    upd = c.normal(16384, 64)
    tf = c.tf
    if kind == "scatter_nd":
        return lambda: [tf.scatter_nd(c.const(idx), c.const(upd), [1024, 64])]
    fn = getattr(tf, "tensor_scatter_nd_" + kind)
    return lambda: [fn(tf.ones([1024, 64], tf.float32), c.const(idx), c.const(upd))]


@_check("scatter-nd", "ScatterNd", quick=False)
def _scatter_nd(c: Trial) -> Callable[[], List[Any]]:
    return _scatter(c, "scatter_nd")


@_check("tensor-scatter-nd-sub", "TensorScatterSub", quick=False)
def _tensor_scatter_sub(c: Trial) -> Callable[[], List[Any]]:
    return _scatter(c, "sub")


@_check("tensor-scatter-nd-update", "TensorScatterUpdate", quick=False)
def _tensor_scatter_update(c: Trial) -> Callable[[], List[Any]]:
    # With duplicate indices the last writer wins, and which write is last depends on thread order.
    return _scatter(c, "update")


@_check("matmul-fp16", "MatMul (float16)", quick=False)
def _matmul_fp16(c: Trial) -> Callable[[], List[Any]]:
    # Half precision takes other cuBLAS kernels (Tensor Cores) and other Eigen paths than float32.
    a, b = c.normal(256, 1024).astype(c.np.float16), c.normal(1024, 256).astype(c.np.float16)
    tf = c.tf
    return lambda: c.output_and_grads(tf.matmul, [c.const(a), c.const(b)])


@_check("conv2d-fp16-backprop", "Conv2D (float16) and its gradients")
def _conv2d_fp16(c: Trial) -> Callable[[], List[Any]]:
    x, f = c.normal(8, 32, 32, 16).astype(c.np.float16), c.normal(3, 3, 16, 16).astype(c.np.float16)
    tf = c.tf
    return lambda: c.output_and_grads(lambda xt, ft: tf.nn.conv2d(xt, ft, S1, "SAME"), [c.const(x), c.const(f)])


@_check("reduce-sum-fp64", "Sum (float64)", quick=False)
def _reduce_sum_fp64(c: Trial) -> Callable[[], List[Any]]:
    x = c.rs.standard_normal((1024, 2048))
    tf = c.tf

    def run() -> List[Any]:
        t = c.const(x)
        return [tf.reduce_sum(t), tf.reduce_sum(t, axis=0)]

    return run


@_check("unsorted-segment-sum-fp64", "UnsortedSegmentSum (float64)", quick=False)
def _unsorted_segment_sum_fp64(c: Trial) -> Callable[[], List[Any]]:
    data = c.rs.standard_normal((4096, 64))
    ids = c.rs.randint(0, 128, size=4096).astype(c.np.int32)
    tf = c.tf
    return lambda: [tf.math.unsorted_segment_sum(c.const(data), c.const(ids), 128)]


@_check("xla-reduce-sum", "XLA reduce (jit_compile=True)", quick=False)
def _xla_reduce(c: Trial) -> Callable[[], List[Any]]:
    # XLA's GPU reductions were nondeterministic before TF 2.2; from 2.2 TF_DETERMINISTIC_OPS makes them
    # deterministic. 1024x4096, all axes and each axis.
    x = c.normal(1024, 4096)
    tf = c.tf
    f = _xla(c, lambda t: [tf.reduce_sum(t), tf.reduce_sum(t, axis=0), tf.reduce_sum(t, axis=1)])
    return lambda: list(f(c.const(x)))


@_check("xla-scatter-add", "XLA scatter (jit_compile=True)")
def _xla_scatter(c: Trial) -> Callable[[], List[Any]]:
    # XLA's Scatter with duplicate indices: nondeterministic on GPU before TF 2.8.
    idx = c.rs.randint(0, 1024, size=(16384, 1)).astype(c.np.int32)
    upd = c.normal(16384, 64)
    tf = c.tf
    f = _xla(c, lambda i, u: tf.tensor_scatter_nd_add(tf.zeros([1024, 64], tf.float32), i, u))
    return lambda: [f(c.const(idx), c.const(upd))]


@_check("xla-gather-gradient", "XLA gather gradient (jit_compile=True)", quick=False)
def _xla_gather_grad(c: Trial) -> Callable[[], List[Any]]:
    # The embedding gradient compiled by XLA becomes a scatter-add over 16384 indices into 1000 rows.
    params = c.normal(1000, 64)
    idx = c.rs.randint(0, 1000, size=16384).astype(c.np.int32)
    up = c.normal(16384, 64)
    tf = c.tf

    def grad(p: Any, i: Any, u: Any) -> Any:
        with tf.GradientTape() as tape:
            tape.watch(p)
            loss = tf.reduce_sum(tf.gather(p, i) * u)
        return tf.convert_to_tensor(tape.gradient(loss, p))

    f = _xla(c, grad)
    return lambda: [f(c.const(params), c.const(idx), c.const(up))]


@_check("max-pool-with-argmax-backprop", "MaxPoolGradWithArgmax")
def _max_pool_argmax(c: Trial) -> Callable[[], List[Any]]:
    # The argmax variant scatters each window's gradient to the recorded input position.
    x = c.normal(8, 64, 64, 8)
    tf = c.tf
    return lambda: c.grads(lambda xt: tf.nn.max_pool_with_argmax(xt, K3, S2, "SAME")[0], [c.const(x)])


@_check("dilation2d-backprop", "Dilation2DBackpropInput/Filter", quick=False)
def _dilation2d(c: Trial) -> Callable[[], List[Any]]:
    # Morphological dilation: every output pixel sends its gradient to the argmax of its 3x3 window.
    x, f = c.normal(4, 32, 32, 8), c.normal(3, 3, 8)
    tf = c.tf
    v1 = tf.compat.v1.nn.dilation2d
    return lambda: c.grads(lambda xt, ft: v1(xt, ft, S1, [1, 1, 1, 1], "SAME"), [c.const(x), c.const(f)])


def _slow_identity(tf: Any, value: Any) -> Any:
    """Element i takes ((7*i) mod 5) / 2 ms: with deterministic=False a parallel stage emits elements in
    completion order, which then depends on thread scheduling."""

    def work(v: Any) -> Any:
        i = int(tfchild.to_numpy(v))
        time.sleep(((7 * i) % 5) / 2000.0)
        return v

    out = tf.py_function(work, [value], tf.int64)
    out.set_shape([])
    return out


def _nondeterministic_options(tf: Any, ds: Any) -> Any:
    opts = tf.data.Options()
    if hasattr(opts, "deterministic"):
        opts.deterministic = False
    else:
        opts.experimental_deterministic = False
    return ds.with_options(opts)


@_check("tf-data-parallel-map-order", "ParallelMapDataset")
def _data_map(c: Trial) -> Callable[[], List[Any]]:
    # A pipeline that opts out of ordering (deterministic=False, as tuning guides suggest): TF >= 2.7 with
    # determinism on rewrites it to keep order; otherwise 4 parallel calls emit in completion order.
    tf = c.tf

    def run() -> List[Any]:
        ds = tf.data.Dataset.range(32).map(lambda i: _slow_identity(tf, i), num_parallel_calls=4)
        return [_nondeterministic_options(tf, ds)]

    return run


@_check("tf-data-interleave-order", "ParallelInterleaveDataset")
def _data_interleave(c: Trial) -> Callable[[], List[Any]]:
    # Parallel interleave of 8 sources x 4 elements with cycle_length 4 and deterministic=False.
    tf = c.tf

    def source(i: Any) -> Any:
        return tf.data.Dataset.range(i * 100, i * 100 + 4).map(lambda v: _slow_identity(tf, v))

    def run() -> List[Any]:
        ds = tf.data.Dataset.range(8).interleave(source, cycle_length=4, block_length=1, num_parallel_calls=4)
        return [_nondeterministic_options(tf, ds)]

    return run


@_check("random-op-without-seed", "RandomStandardNormal (seed=0, seed2=0)")
def _unseeded_random(c: Trial) -> Callable[[], List[Any]]:
    # Not an atomics problem: a random kernel with no seed draws from OS entropy. With determinism on,
    # TF >= 2.7 refuses to run it, so a model that forgot a seed fails instead of silently diverging.
    tf = c.tf
    raw = getattr(tf, "raw_ops", None)

    def run() -> List[Any]:
        if raw is not None:
            return [raw.RandomStandardNormal(shape=[4096], dtype=tf.float32, seed=0, seed2=0)]
        from tensorflow.python.ops import gen_random_ops

        return [gen_random_ops.random_standard_normal([4096], tf.float32, seed=0, seed2=0)]

    return run


@_check("timestamp", "Timestamp")
def _timestamp(c: Trial) -> Callable[[], List[Any]]:
    # Wall-clock time inside the graph (e.g. logging in a tf.data map): different in every run, so from
    # TF 2.7 determinism refuses it on every device.
    tf = c.tf
    return lambda: [tf.timestamp()]


from envpin.probe.selftest import ops_seeds  # noqa: E402,F401  (registers the seed, Keras and XLA checks)

# ---- planted checks: never in the battery; the tests use them to prove the machinery catches problems.


@_check("planted-urandom-sum", "EagerPyFunc (summation order from os.urandom)", planted=True)
def _planted_urandom(c: Trial) -> Callable[[], List[Any]]:
    # 256 chunks of 256 values spanning 6 orders of magnitude; each chunk is summed sequentially in float32
    # in an order drawn from os.urandom. Mathematically every sum is the same; only the rounding differs,
    # exactly like a GPU reduction whose partial sums arrive in a different order.
    np = c.np
    x = (c.rs.standard_normal(65536) * 10.0 ** c.rs.uniform(-3, 3, size=65536)).astype(np.float32)
    tf = c.tf

    def shuffled_sums(t: Any) -> Any:
        a = tfchild.to_numpy(t).reshape(256, 256)
        keys = np.frombuffer(os.urandom(4 * a.size), dtype=np.uint32).reshape(a.shape)
        shuffled = np.take_along_axis(a, np.argsort(keys, axis=1, kind="stable"), axis=1)
        return np.cumsum(shuffled, axis=1, dtype=np.float32)[:, -1]

    def run() -> List[Any]:
        return [tf.py_function(shuffled_sums, [c.const(x)], tf.float32)]

    return run


@_check("planted-raises-under-determinism", "EagerPyFunc (no deterministic implementation)", planted=True)
def _planted_raises(c: Trial) -> Callable[[], List[Any]]:
    # Behaves like a TF kernel without a deterministic implementation: raises only when determinism is on.
    tf = c.tf
    on = c.determinism

    def kernel(t: Any) -> Any:
        if on:
            raise NotImplementedError("A deterministic implementation of PlantedOp is not currently available.")
        return t

    return lambda: [tf.py_function(kernel, [tf.constant([1.0, 2.0])], tf.float32)]


def all_checks() -> List[Check]:
    return list(CHECKS) + list(PLANTED)


def select(names: Optional[Sequence[str]], quick: bool = False) -> List[Check]:
    """The default battery (its quick part with quick=True), or the named checks (planted ones only by name)."""
    if not names:
        return [c for c in CHECKS if c.quick or not quick]
    known = dict((c.name, c) for c in all_checks())
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError("unknown check(s): %s (known: %s)" % (", ".join(unknown), ", ".join(sorted(known))))
    return [known[n] for n in names]

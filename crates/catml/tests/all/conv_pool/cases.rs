//! Seeded random convolution and pooling cases: batch > 1, groups > 1, stride, dilation,
//! padding per side and non-square kernels, each drawn independently per axis.

use std::sync::Arc;

use catml::ir::Primitive;
use catml::prim::{
    AvgPool2d, Conv, Conv1dAttrs, Conv2dAttrs, ConvInputGrad, ConvSpec, ConvWeightGrad, MaxPool2d,
    MaxPool2dScatter, MaxPool2dSelect, Pool2dAttrs, SumPool2d, SumPool2dTranspose,
};
use catml::tensor::TensorType;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use super::support::{f64_type, Case};

/// One spatial axis: (size, kernel, stride, [lo, hi], dilation), the kernel fitting the padded
/// input.
fn axis(rng: &mut ChaCha8Rng, max_dilation: usize) -> (usize, usize, usize, [usize; 2], usize) {
    let kernel = rng.random_range(1..=3);
    let stride = rng.random_range(1..=3);
    let dilation = rng.random_range(1..=max_dilation);
    let pad = [rng.random_range(0..=2), rng.random_range(0..=2)];
    let extent = dilation * (kernel - 1) + 1;
    let size = extent.saturating_sub(pad[0] + pad[1]).max(1) + rng.random_range(0..=3);
    (size, kernel, stride, pad, dilation)
}

/// A convolution of spatial rank 1 or 2 with its three operand types (bias included when
/// `bias`), and the spec.
pub fn conv_case(rng: &mut ChaCha8Rng, rank: usize, bias: bool) -> (ConvSpec, Case) {
    let groups = rng.random_range(1..=3);
    let (cg, og) = (rng.random_range(1..=2), rng.random_range(1..=2));
    let n = rng.random_range(1..=2);
    let axes: Vec<_> = (0..rank).map(|_| axis(rng, 2)).collect();
    let spec: ConvSpec = if rank == 1 {
        let (_, _, stride, padding, dilation) = axes[0];
        Conv1dAttrs {
            stride,
            padding,
            dilation,
            groups,
        }
        .into()
    } else {
        Conv2dAttrs {
            stride: [axes[0].2, axes[1].2],
            padding: [axes[0].3, axes[1].3],
            dilation: [axes[0].4, axes[1].4],
            groups,
        }
        .into()
    };
    let mut x = vec![n, groups * cg];
    let mut w = vec![groups * og, cg];
    x.extend(axes.iter().map(|a| a.0));
    w.extend(axes.iter().map(|a| a.1));
    let mut inputs = vec![f64_type(&x), f64_type(&w)];
    if bias {
        inputs.push(f64_type(&[groups * og]));
    }
    let label = format!("conv{rank}d x{x:?} w{w:?} bias {bias} {spec:?}");
    (spec, Case::new(Arc::new(Conv { spec }), inputs, label))
}

/// Fixed cases using every attribute at once: batch 2, 3 groups, stride, dilation, uneven
/// padding and a non-square kernel (2-D), and their 1-D counterpart.
pub fn all_attribute_conv_cases() -> Vec<(ConvSpec, Case)> {
    let spec2: ConvSpec = Conv2dAttrs {
        stride: [2, 3],
        padding: [[1, 2], [0, 1]],
        dilation: [2, 1],
        groups: 3,
    }
    .into();
    let spec1: ConvSpec = Conv1dAttrs {
        stride: 2,
        padding: [2, 1],
        dilation: 2,
        groups: 2,
    }
    .into();
    let case = |spec: ConvSpec, x: &[usize], w: &[usize]| {
        let inputs = vec![f64_type(x), f64_type(w), f64_type(&[w[0]])];
        let label = format!("fixed conv x{x:?} w{w:?} {spec:?}");
        (spec, Case::new(Arc::new(Conv { spec }), inputs, label))
    };
    vec![
        case(spec2, &[2, 6, 7, 8], &[6, 2, 3, 2]),
        case(spec1, &[2, 4, 9], &[6, 2, 3]),
    ]
}

/// The two transposes of a convolution case.
pub fn transposes_of(spec: ConvSpec, conv: &Case) -> [Case; 2] {
    let rank = spec.rank;
    let x = conv.inputs[0].clone();
    let w = conv.inputs[1].clone();
    let y = conv.kernel_program().output_types()[0].clone();
    let size = |d: &[usize]| if rank == 1 { [1, d[2]] } else { [d[2], d[3]] };
    let input_grad = ConvInputGrad::new(spec, size(x.dims()));
    let weight_grad = ConvWeightGrad::new(spec, size(w.dims()));
    [
        Case::new(
            Arc::new(input_grad),
            vec![y.clone(), w],
            format!("input grad of {}", conv.label),
        ),
        Case::new(
            Arc::new(weight_grad),
            vec![x, y],
            format!("weight grad of {}", conv.label),
        ),
    ]
}

/// The two transposes of a random convolution, as cases of their own.
pub fn conv_transpose_cases(rng: &mut ChaCha8Rng, rank: usize) -> [Case; 2] {
    let (spec, conv) = conv_case(rng, rank, false);
    transposes_of(spec, &conv)
}

/// Random pooling attributes and input dims (N, C, H, W). For max pooling the padding stays
/// below the kernel.
pub fn pool_attrs(rng: &mut ChaCha8Rng, max: bool) -> (Pool2dAttrs, Vec<usize>) {
    let mut attrs = Pool2dAttrs::new([1, 1]);
    let mut dims = vec![rng.random_range(1..=2), rng.random_range(1..=3)];
    for i in 0..2 {
        let (mut size, kernel, stride, mut pad, _) = axis(rng, 1);
        if max {
            pad = pad.map(|p| p.min(kernel - 1));
            size = size.max(kernel);
        }
        attrs.kernel[i] = kernel;
        attrs.stride[i] = stride;
        attrs.padding[i] = pad;
        dims.push(size);
    }
    (attrs, dims)
}

/// The type sum pooling gives x.
fn pooled(attrs: Pool2dAttrs, x: &TensorType) -> TensorType {
    SumPool2d { attrs }.infer(std::slice::from_ref(x)).unwrap()
}

/// Every pooling primitive on random attributes: sum, its transpose, average, max, and max's
/// two helpers.
pub fn pool_cases(rng: &mut ChaCha8Rng) -> Vec<(Case, bool)> {
    let (attrs, dims) = pool_attrs(rng, false);
    let (mattrs, mdims) = pool_attrs(rng, true);
    pool_cases_for(attrs, &dims, mattrs, &mdims)
}

/// Fixed pooling cases with a non-square kernel, unequal strides and uneven padding, batch 2.
pub fn fixed_pool_cases() -> Vec<(Case, bool)> {
    let attrs = Pool2dAttrs::new([3, 2])
        .stride([2, 1])
        .padding([[1, 0], [1, 1]]);
    let mattrs = Pool2dAttrs::new([3, 2])
        .stride([2, 1])
        .padding([[2, 0], [0, 1]]);
    pool_cases_for(attrs, &[2, 3, 6, 5], mattrs, &[2, 2, 5, 6])
}

/// Sum, its transpose and average pooling with `attrs` over `dims`; max pooling and its two
/// helpers with `mattrs` over `mdims`.
fn pool_cases_for(
    attrs: Pool2dAttrs,
    dims: &[usize],
    mattrs: Pool2dAttrs,
    mdims: &[usize],
) -> Vec<(Case, bool)> {
    let x = f64_type(dims);
    let u = pooled(attrs, &x);
    let input_size = [dims[2], dims[3]];
    let mx = f64_type(mdims);
    let mu = pooled(mattrs, &mx);
    let tag = |name: &str, a: &Pool2dAttrs, d: &[usize]| format!("{name} x{d:?} {a:?}");
    vec![
        (
            Case::new(
                Arc::new(SumPool2d { attrs }),
                vec![x.clone()],
                tag("sum_pool2d", &attrs, dims),
            ),
            false,
        ),
        (
            Case::new(
                Arc::new(SumPool2dTranspose { attrs, input_size }),
                vec![u],
                tag("sum_pool2d_transpose", &attrs, dims),
            ),
            false,
        ),
        (
            Case::new(
                Arc::new(AvgPool2d { attrs }),
                vec![x],
                tag("avg_pool2d", &attrs, dims),
            ),
            false,
        ),
        (
            Case::new(
                Arc::new(MaxPool2d { attrs: mattrs }),
                vec![mx.clone()],
                tag("max_pool2d", &mattrs, mdims),
            ),
            true,
        ),
        (
            Case::new(
                Arc::new(MaxPool2dSelect { attrs: mattrs }),
                vec![mx.clone(), mx.clone()],
                tag("max_pool2d_select", &mattrs, mdims),
            ),
            true,
        ),
        (
            Case::new(
                Arc::new(MaxPool2dScatter { attrs: mattrs }),
                vec![mx.clone(), mu],
                tag("max_pool2d_scatter", &mattrs, mdims),
            ),
            true,
        ),
    ]
}

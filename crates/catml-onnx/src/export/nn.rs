//! The neural-network families: softmax and log-softmax, layer norm, convolutions and pooling,
//! each as its ONNX operator where the attributes fit it, else through the lowering.

use catml_core::prim::names;
use catml_core::tensor::{DType, Tensor, TensorType};

use super::families::MapFn;
use super::graph::{Mapped, Site};
use super::proto_build::{attribute, Attr};
use super::ExportError;

type R = Result<Mapped, ExportError>;

pub(crate) const OPS: &[(&str, MapFn)] = &[
    (names::SOFTMAX, softmax),
    (names::LOG_SOFTMAX, softmax),
    (names::LAYER_NORM, layer_norm),
    (names::BATCH_NORM, batch_norm),
    (names::CONV1D, conv),
    (names::CONV2D, conv),
    (names::MAX_POOL2D, pool),
    (names::AVG_POOL2D, pool),
];

fn ints(v: &[usize]) -> Vec<i64> {
    v.iter().map(|&d| d as i64).collect()
}

fn softmax(s: &mut Site) -> R {
    let x = s.x[0].clone();
    let axis = s.attr_usize("axis").unwrap_or(0) as i64;
    let op = if s.prim.name() == names::SOFTMAX {
        "Softmax"
    } else {
        "LogSoftmax"
    };
    Ok(s.emit(op, &[&x], vec![attribute("axis", Attr::Int(axis))]))
}

/// LayerNormalization normalises the trailing axes from `axis` on, with an f32 epsilon (an eps
/// f32 does not hold goes through the lowering). Other axes are moved to the end first and back
/// after. f32 operands are normalised in f64 and rounded once: onnxruntime takes the variance as
/// E[x²] − E[x]², whose cancellation in f32 exceeds the kernel's budget but in f64 stays far
/// below it.
fn layer_norm(s: &mut Site) -> R {
    let rank = s.xt[0].rank();
    let mut axes = s.attr_usizes("axes").unwrap_or_default();
    axes.sort_unstable();
    let eps = s.attr_f64("eps").unwrap_or(1e-5);
    if axes.is_empty() || (eps as f32) as f64 != eps {
        return Ok(Mapped::Lower);
    }
    let rest: Vec<usize> = (0..rank).filter(|a| !axes.contains(a)).collect();
    let perm: Vec<usize> = rest.iter().chain(&axes).copied().collect();
    let moved = perm.iter().enumerate().any(|(k, &a)| k != a);
    let narrow = s.dtype() == DType::F32;
    let mut operands = vec![s.x[0].clone()];
    if s.attr_bool("affine") {
        operands.extend([s.x[1].clone(), s.x[2].clone()]);
    } else {
        let dims: Vec<usize> = axes.iter().map(|&a| s.xt[0].dims()[a]).collect();
        let ones = Tensor::full(&TensorType::new(s.dtype(), dims), 1.0);
        let hint = format!("{}/scale", s.out);
        operands.push(s.g.constant(&ones, &hint));
    }
    if narrow {
        operands = operands.iter().map(|v| s.cast(v, DType::F64)).collect();
    }
    if moved {
        let to_end = vec![attribute("perm", Attr::Ints(ints(&perm)))];
        operands[0] = s.tmp("Transpose", &[&operands[0]], to_end);
    }
    let attrs = vec![
        attribute("axis", Attr::Int(rest.len() as i64)),
        attribute("epsilon", Attr::Float(eps as f32)),
    ];
    let refs: Vec<&str> = operands.iter().map(String::as_str).collect();
    if !moved && !narrow {
        return Ok(s.emit("LayerNormalization", &refs, attrs));
    }
    let mut y = s.tmp("LayerNormalization", &refs, attrs);
    if moved {
        let mut back = vec![0; rank];
        for (k, &a) in perm.iter().enumerate() {
            back[a] = k;
        }
        let back = vec![attribute("perm", Attr::Ints(ints(&back)))];
        if !narrow {
            return Ok(s.emit("Transpose", &[&y], back));
        }
        y = s.tmp("Transpose", &[&y], back);
    }
    Ok(s.emit_cast(&y))
}

/// The lowering (statistics over the batch, or the given running ones), in f64 for f32: two
/// f32 passes over the batch exceed the kernel's budget.
fn batch_norm(_: &mut Site) -> R {
    Ok(Mapped::LowerInF64)
}

/// ONNX pads: every axis's start, then every axis's end.
fn onnx_pads(p: &[[usize; 2]]) -> Vec<i64> {
    p.iter()
        .map(|q| q[0] as i64)
        .chain(p.iter().map(|q| q[1] as i64))
        .collect()
}

/// onnxruntime implements Conv and AveragePool for f32 only: other dtypes use the lowering.
fn conv(s: &mut Site) -> R {
    if s.dtype() != DType::F32 {
        return Ok(Mapped::Lower);
    }
    let (Some(stride), Some(pads), Some(dil), Some(groups)) = (
        s.attr_usizes("stride"),
        s.attr_pads("padding"),
        s.attr_usizes("dilation"),
        s.attr_usize("groups"),
    ) else {
        return Ok(Mapped::Lower);
    };
    let kernel: Vec<usize> = s.xt[1].dims()[2..].to_vec();
    let x = s.x.clone();
    let refs: Vec<&str> = x.iter().map(String::as_str).collect();
    Ok(s.emit(
        "Conv",
        &refs,
        vec![
            attribute("kernel_shape", Attr::Ints(ints(&kernel))),
            attribute("strides", Attr::Ints(ints(&stride))),
            attribute("pads", Attr::Ints(onnx_pads(&pads))),
            attribute("dilations", Attr::Ints(ints(&dil))),
            attribute("group", Attr::Int(groups as i64)),
        ],
    ))
}

/// MaxPool, and AveragePool counting padding as zeros (the divisor is the full window).
fn pool(s: &mut Site) -> R {
    let (Some(kernel), Some(stride), Some(pads)) = (
        s.attr_usizes("kernel"),
        s.attr_usizes("stride"),
        s.attr_pads("padding"),
    ) else {
        return Ok(Mapped::Lower);
    };
    // onnxruntime: AveragePool in f32 only, and padding below the kernel size.
    let wide_pad = pads
        .iter()
        .zip(&kernel)
        .any(|(p, &k)| p[0] >= k || p[1] >= k);
    if s.prim.name() == names::AVG_POOL2D && (s.dtype() != DType::F32 || wide_pad) {
        return Ok(Mapped::Lower);
    }
    let x = s.x[0].clone();
    let mut attrs = vec![
        attribute("kernel_shape", Attr::Ints(ints(&kernel))),
        attribute("strides", Attr::Ints(ints(&stride))),
        attribute("pads", Attr::Ints(onnx_pads(&pads))),
    ];
    let op = if s.prim.name() == names::MAX_POOL2D {
        "MaxPool"
    } else {
        attrs.push(attribute("count_include_pad", Attr::Int(1)));
        "AveragePool"
    };
    Ok(s.emit(op, &[&x], attrs))
}

//! The operator table: each default-domain ONNX operator the importer maps, with the oldest
//! opset whose semantics its mapping implements.

mod affine_grid;
mod arg;
mod attention;
mod bitcast;
mod bitwise;
mod center_crop_pad;
mod col2im;
mod compress;
mod conv_transpose;
mod dft;
mod dropout;
mod einsum;
mod elementwise;
mod grid_sample;
mod index_gather;
pub(crate) mod int_data;
mod linmap;
mod logic;
mod loss;
mod lrn;
mod ml;
mod mvn;
mod nn;
mod norm_stats;
pub(crate) mod output_types;
mod pool_nd;
mod quant;
mod rearrange;
mod recurrent;
mod reduce;
mod rotary;
mod scatter;
mod shape;
mod swiglu;
mod topk;
mod training;
mod window;

use crate::ctx::{Ctx, Value, R};
use crate::domains::{self, Opsets};
use crate::proto::NodeProto;
use crate::OnnxError;

/// An operator mapping: emits the node's outputs.
pub type OpFn = fn(&mut Ctx) -> R<Vec<Value>>;

/// (ONNX op type, mapping). Every opset from the importer's minimum is covered unless the
/// mapping itself reports a version it does not implement.
const TABLE: &[(&str, OpFn)] = &[
    ("Add", elementwise::add),
    ("Sub", elementwise::sub),
    ("Mul", elementwise::mul),
    ("Div", elementwise::div),
    ("Pow", elementwise::pow),
    ("Mod", elementwise::modulo),
    ("Max", elementwise::variadic),
    ("Min", elementwise::variadic),
    ("Sum", elementwise::variadic),
    ("Mean", elementwise::variadic),
    ("PRelu", elementwise::prelu),
    ("Clip", elementwise::clip),
    ("Identity", elementwise::identity),
    ("Dropout", dropout::dropout),
    ("Relu", elementwise::unary),
    ("Sigmoid", elementwise::unary),
    ("Tanh", elementwise::unary),
    ("Exp", elementwise::unary),
    ("Log", elementwise::unary),
    ("Neg", elementwise::unary),
    ("Reciprocal", elementwise::unary),
    ("Abs", elementwise::unary),
    ("Sqrt", elementwise::unary),
    ("Sin", elementwise::unary),
    ("Cos", elementwise::unary),
    ("Atan", elementwise::unary),
    ("Tan", elementwise::unary),
    ("Sinh", elementwise::unary),
    ("Cosh", elementwise::unary),
    ("Asin", elementwise::unary),
    ("Acos", elementwise::unary),
    ("Asinh", elementwise::unary),
    ("Acosh", elementwise::unary),
    ("Atanh", elementwise::unary),
    ("Erf", elementwise::unary),
    ("Floor", elementwise::unary),
    ("Ceil", elementwise::unary),
    ("Round", elementwise::unary),
    ("Sign", elementwise::unary),
    ("Softplus", elementwise::unary),
    ("LeakyRelu", elementwise::unary),
    ("Elu", elementwise::unary),
    ("Selu", elementwise::unary),
    ("Celu", elementwise::unary),
    ("Softsign", elementwise::unary),
    ("HardSigmoid", elementwise::unary),
    ("HardSwish", elementwise::unary),
    ("ThresholdedRelu", elementwise::unary),
    ("Swish", elementwise::unary),
    ("Mish", elementwise::unary),
    ("Shrink", elementwise::unary),
    ("Gelu", elementwise::unary),
    ("Reshape", shape::reshape),
    ("Flatten", shape::flatten),
    ("Squeeze", shape::squeeze),
    ("Unsqueeze", shape::unsqueeze),
    ("Transpose", shape::transpose),
    ("Concat", shape::concat),
    ("Slice", shape::slice),
    ("Split", shape::split),
    ("Gather", shape::gather),
    ("Expand", shape::expand),
    ("Tile", shape::tile),
    ("Shape", shape::shape),
    ("Size", shape::size),
    ("Constant", shape::constant),
    ("ConstantOfShape", shape::constant_of_shape),
    ("Range", shape::range),
    ("Cast", shape::cast),
    ("CastLike", shape::cast),
    ("Pad", shape::pad),
    ("DepthToSpace", shape::depth_space),
    ("SpaceToDepth", shape::depth_space),
    ("Trilu", shape::trilu),
    ("ReduceSum", reduce::reduce),
    ("ReduceProd", reduce::reduce),
    ("Hardmax", reduce::hardmax),
    ("LpNormalization", reduce::lp_normalization),
    ("ReduceMean", reduce::reduce),
    ("ReduceMax", reduce::reduce),
    ("ReduceMin", reduce::reduce),
    ("ReduceSumSquare", reduce::reduce),
    ("ReduceL1", reduce::reduce),
    ("ReduceL2", reduce::reduce),
    ("ReduceLogSum", reduce::reduce),
    ("ReduceLogSumExp", reduce::reduce),
    ("Softmax", reduce::softmax),
    ("LogSoftmax", reduce::softmax),
    ("MatMul", nn::matmul),
    ("Gemm", nn::gemm),
    ("Conv", nn::conv),
    ("ConvTranspose", conv_transpose::conv_transpose),
    ("MaxPool", nn::pool),
    ("AveragePool", nn::pool),
    ("LpPool", nn::pool),
    ("GlobalAveragePool", nn::global_pool),
    ("GlobalMaxPool", nn::global_pool),
    ("BatchNormalization", nn::batch_norm),
    ("LayerNormalization", nn::layer_norm),
    ("InstanceNormalization", nn::instance_norm),
    ("GroupNormalization", nn::group_norm),
    ("RMSNormalization", nn::rms_norm),
    ("Equal", logic::compare),
    ("Less", logic::compare),
    ("LessOrEqual", logic::compare),
    ("Greater", logic::compare),
    ("GreaterOrEqual", logic::compare),
    ("Not", logic::logical),
    ("And", logic::logical),
    ("Or", logic::logical),
    ("Xor", logic::logical),
    ("Where", logic::where_),
    ("IsNaN", logic::is_special),
    ("IsInf", logic::is_special),
    ("GatherElements", loss::gather_elements),
    ("NegativeLogLikelihoodLoss", loss::nll_loss),
    ("SoftmaxCrossEntropyLoss", loss::softmax_cross_entropy),
    ("Einsum", einsum::einsum),
    ("CumSum", linmap::cumsum),
    ("CumProd", linmap::cumprod),
    ("OneHot", linmap::one_hot),
    ("EyeLike", linmap::eye_like),
    ("Resize", linmap::resize),
    ("Attention", attention::attention),
    ("ArgMax", arg::arg_extreme),
    ("ArgMin", arg::arg_extreme),
    ("RNN", recurrent::rnn),
    ("GRU", recurrent::gru),
    ("LSTM", recurrent::lstm),
    ("RotaryEmbedding", rotary::rotary_embedding),
    ("CenterCropPad", center_crop_pad::center_crop_pad),
    ("Compress", compress::compress),
    ("ScatterElements", scatter::scatter_elements),
    ("Scatter", scatter::scatter_elements),
    ("ScatterND", scatter::scatter_nd),
    ("DFT", dft::dft),
    ("Col2Im", col2im::col2im),
    ("HannWindow", window::window),
    ("HammingWindow", window::window),
    ("BlackmanWindow", window::window),
    ("AffineGrid", affine_grid::affine_grid),
    ("GatherND", index_gather::gather_nd),
    ("ReverseSequence", index_gather::reverse_sequence),
    ("SwiGLU", swiglu::swiglu),
    ("LRN", lrn::lrn),
    ("TopK", topk::topk),
    ("GridSample", grid_sample::grid_sample),
    ("BitCast", bitcast::bitcast),
    (
        "MeanVarianceNormalization",
        mvn::mean_variance_normalization,
    ),
    ("BitShift", bitwise::bit_shift),
    ("BitwiseAnd", bitwise::bitwise),
    ("BitwiseOr", bitwise::bitwise),
    ("BitwiseXor", bitwise::bitwise),
    ("BitwiseNot", bitwise::bitwise_not),
    ("QuantizeLinear", quant::quantize_linear),
    ("DequantizeLinear", quant::dequantize_linear),
    ("QLinearMatMul", quant::qlinear_matmul),
    ("DynamicQuantizeLinear", quant::dynamic_quantize_linear),
    ("TensorScatter", rearrange::tensor_scatter),
];

/// Operators whose outputs are random: never folded.
pub fn is_random(op: &str) -> bool {
    op.starts_with("Random") || op == "Bernoulli"
}

/// The mapping of a node's operator and the version of its domain the model imports, or an
/// unsupported-operator error naming the node.
pub fn lookup(index: usize, node: &NodeProto, opsets: &Opsets) -> Result<(OpFn, i64), OnnxError> {
    let unsupported = |what: String| OnnxError::Unsupported {
        index,
        name: node.name.clone(),
        op: node.op_type.clone(),
        what,
    };
    let default = node.domain.is_empty() || node.domain == "ai.onnx";
    let table: &[(&str, OpFn)] = match node.domain.as_str() {
        _ if default => TABLE,
        domains::TRAINING => training::TABLE,
        domains::ML => ml::TABLE,
        other => return Err(unsupported(format!("operator domain `{other}`"))),
    };
    let version = opsets.version(&node.domain).ok_or_else(|| {
        unsupported(if default {
            "no opset of the default domain (ai.onnx)".to_string()
        } else {
            format!("the model imports no opset of domain `{}`", node.domain)
        })
    })?;
    if let Some((d, lo, hi)) = domains::KNOWN.iter().find(|(d, _, _)| *d == node.domain) {
        if !(*lo..=*hi).contains(&version) {
            return Err(unsupported(format!(
                "{d} version {version} (supported: {lo} to {hi})"
            )));
        }
    }
    if node
        .attribute
        .iter()
        .any(|a| a.g.is_some() || !a.graphs.is_empty())
    {
        return Err(unsupported("nested subgraphs (If, Loop, Scan)".to_string()));
    }
    table
        .iter()
        .find(|(name, _)| *name == node.op_type)
        .map(|(_, f)| (*f, version))
        .ok_or_else(|| unsupported("operator not implemented".to_string()))
}

/// The static part of `lookup` (for nodes `check` cannot import because an input is missing).
pub fn check_known(index: usize, node: &NodeProto, opsets: &Opsets) -> Result<(), OnnxError> {
    lookup(index, node, opsets).map(|_| ())
}

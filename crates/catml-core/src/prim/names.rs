//! Every built-in primitive's registry name (its LensIR `op`), for code outside `prim/` that
//! refers to one: an importer building programs, an exporter's mapping tables. Naming the
//! constant instead of writing the string makes a misspelt or renamed primitive a compile error;
//! a test holds this list equal to the registry.

pub const ABS: &str = "abs";
pub const ADD: &str = "add";
pub const ARGMAX: &str = "argmax";
pub const ATAN: &str = "atan";
pub const ATTENTION_PROBS: &str = "attention_probs";
pub const AVG_POOL2D: &str = "avg_pool2d";
pub const BATCH_MATMUL: &str = "batch_matmul";
pub const BATCH_NORM: &str = "batch_norm";
pub const BROADCAST: &str = "broadcast";
pub const BROADCAST_ROWS: &str = "broadcast_rows";
pub const CEIL: &str = "ceil";
pub const CLIP: &str = "clip";
pub const CONCAT: &str = "concat";
pub const CONSTANT: &str = "constant";
pub const CONV1D: &str = "conv1d";
pub const CONV1D_INPUT_GRAD: &str = "conv1d_input_grad";
pub const CONV1D_WEIGHT_GRAD: &str = "conv1d_weight_grad";
pub const CONV2D: &str = "conv2d";
pub const CONV2D_INPUT_GRAD: &str = "conv2d_input_grad";
pub const CONV2D_WEIGHT_GRAD: &str = "conv2d_weight_grad";
pub const CONVERT: &str = "convert";
pub const COS: &str = "cos";
pub const CROSS_ENTROPY: &str = "cross_entropy";
pub const DIV: &str = "div";
pub const DROPOUT: &str = "dropout";
pub const ELU: &str = "elu";
pub const EQUAL: &str = "equal";
pub const ERF: &str = "erf";
pub const EXP: &str = "exp";
pub const EXPM1: &str = "expm1";
pub const FLOOR: &str = "floor";
pub const GATHER: &str = "gather";
pub const GELU: &str = "gelu";
pub const GREATER: &str = "greater";
pub const GREATER_EQUAL: &str = "greater_equal";
pub const HEAVISIDE: &str = "heaviside";
pub const LAYER_NORM: &str = "layer_norm";
pub const LEAKY_RELU: &str = "leaky_relu";
pub const LESS: &str = "less";
pub const LESS_EQUAL: &str = "less_equal";
pub const LINEAR: &str = "linear";
pub const LOG: &str = "log";
pub const LOG1P: &str = "log1p";
pub const LOG_SOFTMAX: &str = "log_softmax";
pub const LOGICAL_AND: &str = "logical_and";
pub const LOGICAL_NOT: &str = "logical_not";
pub const LOGICAL_OR: &str = "logical_or";
pub const LOGICAL_XOR: &str = "logical_xor";
pub const MASKED_SOFTMAX: &str = "masked_softmax";
pub const MATMUL: &str = "matmul";
pub const MAX_POOL2D: &str = "max_pool2d";
pub const MAX_POOL2D_SCATTER: &str = "max_pool2d_scatter";
pub const MAX_POOL2D_SELECT: &str = "max_pool2d_select";
pub const MAX_WEIGHTS: &str = "max_weights";
pub const MAXIMUM: &str = "maximum";
pub const MEAN: &str = "mean";
pub const MINIMUM: &str = "minimum";
pub const MSE: &str = "mse";
pub const MUL: &str = "mul";
pub const NEG: &str = "neg";
pub const ONE_HOT: &str = "one_hot";
pub const PER_EXAMPLE: &str = "per_example";
pub const PERMUTE: &str = "permute";
pub const POW: &str = "pow";
pub const POWI: &str = "powi";
pub const RANDOM_FOLD_IN: &str = "random_fold_in";
pub const RANDOM_NORMAL: &str = "random_normal";
pub const RANDOM_SPLIT: &str = "random_split";
pub const RANDOM_UNIFORM: &str = "random_uniform";
pub const RECIPROCAL: &str = "reciprocal";
pub const REDUCE_MAX: &str = "reduce_max";
pub const RELU: &str = "relu";
pub const RESHAPE: &str = "reshape";
pub const ROUND: &str = "round";
pub const RSQRT: &str = "rsqrt";
pub const SCAN: &str = "scan";
pub const SCATTER_ADD: &str = "scatter_add";
pub const SCATTER_ROWS: &str = "scatter_rows";
pub const SDPA: &str = "sdpa";
pub const SIGMOID: &str = "sigmoid";
pub const SIGN: &str = "sign";
pub const SIN: &str = "sin";
pub const SOFTMAX: &str = "softmax";
pub const SOFTMAX_PULLBACK: &str = "softmax_pullback";
pub const SOFTPLUS: &str = "softplus";
pub const SQRT: &str = "sqrt";
pub const SQUARE: &str = "square";
pub const STOP_GRADIENT: &str = "stop_gradient";
pub const SUB: &str = "sub";
pub const SUM: &str = "sum";
pub const SUM_POOL2D: &str = "sum_pool2d";
pub const SUM_POOL2D_TRANSPOSE: &str = "sum_pool2d_transpose";
pub const TAKE: &str = "take";
pub const TANH: &str = "tanh";
pub const TANH_PULLBACK: &str = "tanh_pullback";
pub const UNPACK: &str = "unpack";
pub const WHERE: &str = "where";

/// Every constant above, in order.
pub const ALL: &[&str] = &[
    ABS,
    ADD,
    ARGMAX,
    ATAN,
    ATTENTION_PROBS,
    AVG_POOL2D,
    BATCH_MATMUL,
    BATCH_NORM,
    BROADCAST,
    BROADCAST_ROWS,
    CEIL,
    CLIP,
    CONCAT,
    CONSTANT,
    CONV1D,
    CONV1D_INPUT_GRAD,
    CONV1D_WEIGHT_GRAD,
    CONV2D,
    CONV2D_INPUT_GRAD,
    CONV2D_WEIGHT_GRAD,
    CONVERT,
    COS,
    CROSS_ENTROPY,
    DIV,
    DROPOUT,
    ELU,
    EQUAL,
    ERF,
    EXP,
    EXPM1,
    FLOOR,
    GATHER,
    GELU,
    GREATER,
    GREATER_EQUAL,
    HEAVISIDE,
    LAYER_NORM,
    LEAKY_RELU,
    LESS,
    LESS_EQUAL,
    LINEAR,
    LOG,
    LOG1P,
    LOG_SOFTMAX,
    LOGICAL_AND,
    LOGICAL_NOT,
    LOGICAL_OR,
    LOGICAL_XOR,
    MASKED_SOFTMAX,
    MATMUL,
    MAX_POOL2D,
    MAX_POOL2D_SCATTER,
    MAX_POOL2D_SELECT,
    MAX_WEIGHTS,
    MAXIMUM,
    MEAN,
    MINIMUM,
    MSE,
    MUL,
    NEG,
    ONE_HOT,
    PER_EXAMPLE,
    PERMUTE,
    POW,
    POWI,
    RANDOM_FOLD_IN,
    RANDOM_NORMAL,
    RANDOM_SPLIT,
    RANDOM_UNIFORM,
    RECIPROCAL,
    REDUCE_MAX,
    RELU,
    RESHAPE,
    ROUND,
    RSQRT,
    SCAN,
    SCATTER_ADD,
    SCATTER_ROWS,
    SDPA,
    SIGMOID,
    SIGN,
    SIN,
    SOFTMAX,
    SOFTMAX_PULLBACK,
    SOFTPLUS,
    SQRT,
    SQUARE,
    STOP_GRADIENT,
    SUB,
    SUM,
    SUM_POOL2D,
    SUM_POOL2D_TRANSPOSE,
    TAKE,
    TANH,
    TANH_PULLBACK,
    UNPACK,
    WHERE,
];

#[cfg(test)]
mod tests {
    #[test]
    fn the_list_is_the_registry() {
        let mut registered: Vec<&str> = crate::prim::builtins().names().collect();
        registered.sort_unstable();
        let mut listed = super::ALL.to_vec();
        listed.sort_unstable();
        assert_eq!(listed, registered);
    }
}
